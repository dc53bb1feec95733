"""What replication costs: single-node acks=1 against a three-node RF=3 acks=all cluster.

Usage:
    perf/cluster_bench.py [--runs N] [--messages N] [--partitions N] [--json out.json]

It launches the targets itself on 127.0.0.1 - one `kafkapy serve` (perf/bench.py's launcher)
and a three-node cluster (kafkapy.testing.cluster, every node a combined broker + controller)
- creates a topic (replication factor 1, and 3 with min.insync.replicas=2) and runs
perf/bench.py's librdkafka produce phase (1 KiB values, linger.ms=5, batch.size=1 MiB), A then
B per run, so drift of a shared machine hits both sides alike. Only the target under test runs:
each is started fresh for its phase and stopped after it, because an idle cluster is not free
(Raft and replica fetch long polls, heartbeats) and would slow the single node it shares the
cores with. The idle cluster's CPU share is reported too.

Figures (median over runs, min-max spread): produce msgs/s and MiB/s per target, client CPU
share (% of one core: near 100 means librdkafka, not the broker, may be the limit), broker CPU
share (all three node processes summed for the cluster), and the ratio B/A of the medians - the
cluster-mode goal is >= 0.6. All processes share this machine's cores, so the cluster's three
brokers compete with each other and with the client; the ratio is a floor for separate machines.
Because the machine may be shared, each phase also records the brokers' kernel CPU, the whole
machine's busy and stolen shares (a phase with box% near 200 and cli% + brk% well below it
competed with other work) and messages per CPU-second of client + brokers, a cost figure that
other load disturbs much less than the rate.

Every loop stops by count and by time (--max-seconds per phase).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF))
sys.path.insert(0, str(PERF.parent))

import bench  # noqa: E402  (perf/bench.py: launcher, produce phase, CPU meters)

from kafkapy.testing.cluster import ClusterProcesses  # noqa: E402

GOAL_RATIO = 0.6
IDLE_SECONDS = 3.0


def create_topic(bootstrap: str, partitions: int, rf: int) -> str:
    name = f"cbench-{time.time_ns() % 10**10}-rf{rf}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if rf > 1 else {}
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config)])[
        name
    ].result(60)
    # wait until every partition has a leader (and, replicated, its full ISR)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=20).topics[name]
        if md.partitions and all(p.leader >= 0 and len(p.isrs) == rf for p in md.partitions.values()):
            return name
        time.sleep(0.2)
    raise SystemExit(f"topic {name} never got leaders and a full ISR")


def _sys_seconds(pid: int) -> float:
    """Kernel CPU time (stime) of `pid`; 0 when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return int(fields[12]) / bench._CLK_TCK


def _machine_ticks() -> tuple[int, int, int]:
    """(busy, steal, total) clock ticks of the whole machine, all cores, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle = values[3] + values[4]  # idle + iowait
    steal = values[7]
    total = sum(values)
    return total - idle - steal, steal, total


def produce(bootstrap: str, topic: str, acks: str, pids: list[int], p: bench.Params) -> dict[str, float]:
    """bench.py's produce phase, with the CPU of every broker process summed.

    Also the CPU accounting that says whether a figure is CPU-bound: the brokers' kernel share,
    and the whole machine's busy and stolen share over the phase (% of one core, so 200 = both
    cores of this machine; it includes other processes' load, which the per-process figures
    miss)."""
    cpu0 = [bench._proc_cpu_seconds(pid) for pid in pids]
    sys0 = [_sys_seconds(pid) for pid in pids]
    busy0, steal0, total0 = _machine_ticks()
    wall0 = time.perf_counter()
    bench.BROKER_PID = pids[0]
    result = bench.produce_throughput(bootstrap, topic, acks, p)
    wall = time.perf_counter() - wall0
    used = sum(bench._proc_cpu_seconds(pid) - c for pid, c in zip(pids, cpu0, strict=True))
    kernel = sum(_sys_seconds(pid) - c for pid, c in zip(pids, sys0, strict=True))
    busy1, steal1, total1 = _machine_ticks()
    cores = os.cpu_count() or 1
    ticks = max(total1 - total0, 1)
    result["broker_cpu_pct"] = 100.0 * used / wall if wall > 0 else 0.0
    result["broker_sys_pct"] = 100.0 * kernel / wall if wall > 0 else 0.0
    result["machine_busy_pct"] = 100.0 * cores * (busy1 - busy0) / ticks
    result["machine_steal_pct"] = 100.0 * cores * (steal1 - steal0) / ticks
    # messages per CPU-second of client + brokers: what a figure costs, whatever else ran
    spent = (result["client_cpu_pct"] + result["broker_cpu_pct"]) / 100.0
    result["msgs_per_cpu_s"] = result["msgs_per_s"] / spent if spent > 0 else 0.0
    return result


def idle_cpu_pct(pids: list[int], seconds: float) -> float:
    """CPU share (% of one core, all processes summed) of a cluster doing nothing for `seconds`."""
    cpu0 = [bench._proc_cpu_seconds(pid) for pid in pids]
    wall0 = time.perf_counter()
    time.sleep(seconds)
    used = sum(bench._proc_cpu_seconds(pid) - c for pid, c in zip(pids, cpu0, strict=True))
    return 100.0 * used / (time.perf_counter() - wall0)


def summarise(runs: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "median": {k: statistics.median(r[k] for r in runs) for k in runs[0]},
        "spread": {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in runs[0]},
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000, help="per produce phase")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap per phase")
    parser.add_argument("--json", type=Path, default=PERF / "results" / "cluster_bench.json")
    args = parser.parse_args(argv)
    p = bench.Params(args.messages, 0.0, args.partitions, args.max_seconds)

    labels = {"A": "single node, RF=1, acks=1", "B": "3 nodes, RF=3, acks=all"}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in labels}
    idle: list[float] = []
    with tempfile.TemporaryDirectory(prefix="kafkapy-cbench-") as tmp:
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs}: A {labels['A']} ...", file=sys.stderr, flush=True)
            single = bench.LaunchedBroker(Path(tmp) / f"single{i}")
            try:
                topic = create_topic(single.bootstrap, args.partitions, 1)
                runs["A"].append(produce(single.bootstrap, topic, "1", [single.proc.pid], p))
            finally:
                single.stop()
            print(f"run {i + 1}/{args.runs}: B {labels['B']} ...", file=sys.stderr, flush=True)
            cluster = ClusterProcesses(
                Path(tmp) / f"cluster{i}", 3, log_level="WARNING",
                # production-like failure detection: the benchmark kills nothing
                overrides={"broker.session.timeout.ms": "9000", "broker.heartbeat.interval.ms": "2000",
                           "replica.lag.time.max.ms": "30000"},
            )
            try:
                cluster.start()
                pids = [n.proc.pid for n in cluster.nodes.values() if n.proc is not None]
                topic = create_topic(cluster.bootstrap, args.partitions, 3)
                idle.append(idle_cpu_pct(pids, IDLE_SECONDS))
                runs["B"].append(produce(cluster.bootstrap, topic, "all", pids, p))
            finally:
                cluster.stop()

    summary = {name: {"label": labels[name], **summarise(r)} for name, r in runs.items()}
    ratio = summary["B"]["median"]["msgs_per_s"] / summary["A"]["median"]["msgs_per_s"]
    print(f"{'target':28}{'msgs/s':>10}{'min-max':>19}{'MiB/s':>8}{'cli%':>6}{'brk%':>6}{'sys%':>6}"
          f"{'box%':>6}{'st%':>5}{'msg/cpu-s':>10}{'errors':>7}")  # fmt: skip
    for s in summary.values():
        med, (lo, hi) = s["median"], s["spread"]["msgs_per_s"]
        print(f"{s['label']:28}{med['msgs_per_s']:>10.0f}{f'{lo:.0f}-{hi:.0f}':>19}{med['mib_per_s']:>8.1f}"
              f"{med['client_cpu_pct']:>6.0f}{med['broker_cpu_pct']:>6.0f}{med['broker_sys_pct']:>6.0f}"
              f"{med['machine_busy_pct']:>6.0f}{med['machine_steal_pct']:>5.0f}{med['msgs_per_cpu_s']:>10.0f}"
              f"{med['errors']:>7.0f}")  # fmt: skip
    print(f"ratio B/A (produce msgs/s, medians): {ratio:.2f}  (goal >= {GOAL_RATIO})")
    cost = summary["B"]["median"]["msgs_per_cpu_s"] / summary["A"]["median"]["msgs_per_cpu_s"]
    print(f"ratio B/A of messages per CPU-second (client + brokers, medians): {cost:.2f}")
    print(f"idle 3-node cluster CPU (all nodes, % of one core, {IDLE_SECONDS:.0f} s): median {statistics.median(idle):.0f}")
    print("cli% / brk% = client / broker CPU time over wall time (100 = one core; brk% of B sums 3 nodes);")
    print(f"sys% = the brokers' kernel part of brk%; box% / st% = whole machine busy / stolen ({os.cpu_count()} cores"
          f" = {100 * (os.cpu_count() or 1)}%, other processes included); msg/cpu-s = msgs/s per (cli% + brk%)")
    report = {
        "params": {**vars(p), "value_bytes": bench.VALUE_BYTES, "linger_ms": 5, "runs": args.runs},
        "targets": summary,
        "ratio_b_over_a": ratio,
        "cpu_cost_ratio_b_over_a": cost,
        "idle_cluster_cpu_pct": {"median": statistics.median(idle), "runs": idle},
        "goal_ratio": GOAL_RATIO,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
