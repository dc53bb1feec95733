"""Metadata quorum (Raft) benchmarks.

Figures (printed, and written to perf/results/raft_bench.json or --json PATH):

- `core_events_per_s`: the sans-IO `RaftCore` alone - a seeded 3-voter + observer simulation
  without faults (tests/raft/simulation.py), events (requests, responses, ticks) stepped per
  wall second, and `core_commits_per_s`, entries committed on every node per wall second.
- `commit_latency_ms` (p50/p99) and `sequential_commits_per_s`: three in-process Raft replicas
  over 127.0.0.1 sockets with fsync (tests/server/cluster/raft_harness.py): one proposer,
  `propose` + `wait_committed` of one record at a time.
- `concurrent_commits_per_s`: 16 proposers at once (entries share fsyncs and fetches).
- `idle_cpu_pct`: CPU the idle quorum (3 voters + observer in this one process) uses while
  nothing is proposed (long-polling fetches only), in percent of one core.
- `failover_clean_ms` / `failover_crash_ms`: a leader stopped cleanly (EndQuorumEpoch) or
  without resigning (a crash), until the other voters agree on a new leader; with Kafka's default
  timeouts (election 1000 ms, fetch 2000 ms).

Run: .venv/bin/python perf/raft_bench.py [--commits N] [--failovers N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.raft.simulation import Simulation  # noqa: E402
from tests.server.cluster.raft_harness import Quorum, propose, quorum  # noqa: E402

RESULTS = ROOT / "perf" / "results" / "raft_bench.json"
KAFKA_DEFAULT_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.request.timeout.ms": "2000",
}


def bench_core(proposals: int) -> dict[str, float]:
    sim = Simulation(seed=7, voters=3, observers=1, loss=0.0)
    sim.run_until(3_000)
    started = time.perf_counter()
    events_before = sim.events
    for _ in range(proposals):
        sim.propose_to_leaders()
        sim.run_until(sim.now + 5)
    sim.run_until(sim.now + 2_000)
    elapsed = time.perf_counter() - started
    committed = min(len(n.applied) for n in sim.nodes.values())
    return {
        "core_events_per_s": round((sim.events - events_before) / elapsed),
        "core_commits_per_s": round(committed / elapsed),
    }


async def bench_quorum(base: Path, commits: int) -> dict[str, float]:
    async with quorum(base / "q1") as q:
        await propose(q, [b"warm-up"])
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await trio.sleep(3)
        after, idle_s = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
        idle_cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / idle_s
        latencies = []
        started = time.perf_counter()
        for i in range(commits):
            t = time.perf_counter()
            await propose(q, [b"record-%d" % i])
            latencies.append((time.perf_counter() - t) * 1000)
        sequential = commits / (time.perf_counter() - started)

        done = 0

        async def proposer(n: int) -> None:
            nonlocal done
            for i in range(n):
                await propose(q, [b"c-%d" % i])
                done += 1

        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(16):
                nursery.start_soon(proposer, max(1, commits // 16))
        concurrent = done / (time.perf_counter() - started)
        for mb in q.live():
            await q.stop(mb.node_id)
    latencies.sort()
    return {
        "commit_latency_ms_p50": round(statistics.median(latencies), 2),
        "commit_latency_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1], 2),
        "sequential_commits_per_s": round(sequential),
        "concurrent_commits_per_s": round(concurrent),
        "idle_cpu_pct": round(idle_cpu * 100, 1),
    }


async def _failover(q: Quorum, *, clean: bool) -> float:
    leader = await q.leader()
    leader.raft.resign_on_stop = clean
    started = time.perf_counter()
    await q.stop(leader.node_id)
    await q.leader(timeout_s=30)
    return (time.perf_counter() - started) * 1000


async def bench_failover(base: Path, rounds: int) -> dict[str, float]:
    out: dict[str, list[float]] = {"clean": [], "crash": []}
    for i in range(rounds):
        for kind in ("clean", "crash"):
            async with quorum(base / f"f{kind}{i}", KAFKA_DEFAULT_TIMEOUTS) as q:
                await propose(q, [b"x"])
                out[kind].append(await _failover(q, clean=kind == "clean"))
                for mb in q.live():
                    await q.stop(mb.node_id)
    return {
        "failover_clean_ms": round(statistics.median(out["clean"])),
        "failover_crash_ms": round(statistics.median(out["crash"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=500)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    figures: dict[str, object] = {"python": platform.python_version(), "machine": platform.machine()}
    figures.update(bench_core(args.commits))
    with tempfile.TemporaryDirectory(prefix="raft-bench-") as tmp:
        figures.update(trio.run(bench_quorum, Path(tmp), args.commits))
        figures.update(trio.run(bench_failover, Path(tmp), args.failovers))
    for key, value in figures.items():
        print(f"{key:28} {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
