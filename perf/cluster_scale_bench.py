"""A three-node cluster following many replicas: CreateTopics, loop stalls, idle cost, DeleteTopics.

Usage:
    perf/cluster_scale_bench.py [--runs N] [--topics N] [--partitions P] [--idle-seconds S]
                                [--vs-tree PATH] [--json PATH]

The scenario behind compat_tests/PEERS.md's 3-node stall: three combined broker + controller
subprocess nodes (kafkapy.testing.cluster), one CreateTopics of N topics x P partitions at
replication factor 3 (N x P x 3 replicas), then an idle period, then DeleteTopics of one topic.

Figures per run:
- `create_s`: the CreateTopics call until every partition reports a leader and a full ISR
  (`create_retries`: CreateTopics calls repeated for topics refused with a retriable error);
- `logs_ready_s`: from the CreateTopics call until every node has every replica's log directory
  (the idle period starts 2 s after that, so it measures a settled cluster);
- `stall_max_s` per node: the longest round trip of an ApiVersions request sent every 100 ms to
  each node's controller listener while the topics are created (a request waits for that node's
  event loop, so this is the loop lag a BrokerHeartbeat sees), and the longest
  "did not run for" the node logged;
- `idle_cpu_pct` per node: CPU share (% of one core) over --idle-seconds after the ISR is full;
- `idle_rtt_ms`: median and max ApiVersions round trip per node over the idle period;
- `heartbeat_warnings`: log lines about late heartbeats ("no heartbeat [answered] for") in the run;
- `delete_ms`: DeleteTopics of one topic, median of 5 (each on a different topic).

`--vs-tree PATH` alternates runs with another source tree's kafkapy (A/B in one machine
window): run A uses this tree, run B the other, per round. Every loop is bounded by count and
time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PERF = Path(__file__).resolve().parent
ROOT = PERF.parent


def _child(args: argparse.Namespace, tree: Path) -> dict[str, Any]:
    """Run one measurement in a child interpreter whose kafkapy comes from `tree`."""
    cmd = [
        sys.executable, str(PERF / "cluster_scale_bench.py"), "--one",
        "--topics", str(args.topics), "--partitions", str(args.partitions),
        "--idle-seconds", str(args.idle_seconds),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=900, check=False)
    if out.returncode != 0:
        raise SystemExit(f"run in {tree} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rtt_ms(host: str, port: int, correlation_id: int) -> float:
    from kafkapy.protocol import ApiKey, RequestHeader, encode_request
    from kafkapy.protocol.messages import ApiVersionsRequest

    request = encode_request(RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id, "scale-bench"), ApiVersionsRequest())
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return 1000.0 * (time.perf_counter() - t0)


class Pinger:
    """Sends ApiVersions to each node every 100 ms from one thread per node; keeps round trips."""

    def __init__(self, targets: dict[int, tuple[str, int]]) -> None:
        self.targets = targets
        self.samples: dict[int, list[float]] = {n: [] for n in targets}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in targets]

    def _run(self, node: int) -> None:
        host, port = self.targets[node]
        i = 0
        while not self.stop.is_set():
            i += 1
            try:
                self.samples[node].append(_rtt_ms(host, port, i))
            except OSError:
                self.samples[node].append(30000.0)
            self.stop.wait(0.1)

    def __enter__(self) -> Pinger:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(35)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(topics: int, partitions: int, idle_seconds: float) -> dict[str, Any]:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    from kafkapy.testing.cluster import ClusterProcesses

    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp, ClusterProcesses(Path(tmp), 3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 180000})
        targets = {n: (node.host, node.controller_port) for n, node in cluster.nodes.items()}
        names = [f"scale-{i}" for i in range(topics)]
        new = [NewTopic(t, num_partitions=partitions, replication_factor=3) for t in names]
        with Pinger(targets) as create_pings:
            t0 = time.perf_counter()
            retries = 0
            for _ in range(10):  # a retriable refusal (NOT_CONTROLLER: a controller rebuild) is retried
                again = []
                for t, fut in admin.create_topics(new, operation_timeout=120, request_timeout=180).items():
                    try:
                        fut.result(200)
                    except KafkaException as exc:  # TOPIC_ALREADY_EXISTS: a retried request's own topic
                        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                            if not exc.args[0].retriable():
                                raise
                            again.append(t)
                if not again:
                    break
                retries += 1
                new = [NewTopic(t, num_partitions=partitions, replication_factor=3) for t in again]
                time.sleep(1.0)
            accepted_s = time.perf_counter() - t0
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                md = admin.list_topics(timeout=30).topics
                if all(
                    t in md and len(md[t].partitions) == partitions
                    and all(p.leader >= 0 and len(p.isrs) == 3 for p in md[t].partitions.values())
                    for t in names
                ):
                    break
                time.sleep(0.5)
            else:
                raise SystemExit("partitions never got leaders and a full ISR")
            create_s = time.perf_counter() - t0
            # every node holds a log directory of each of its replicas (RF 3 on 3 nodes: all)
            while time.monotonic() < deadline and not all(
                sum(1 for d in node.data_dir.iterdir() if d.name.startswith("scale-")) >= topics * partitions
                for node in cluster.nodes.values()
            ):
                time.sleep(0.2)
            logs_ready_s = time.perf_counter() - t0
        time.sleep(2.0)
        pids = {n: node.proc.pid for n, node in cluster.nodes.items() if node.proc is not None}
        cpu0 = {n: _cpu_s(p) for n, p in pids.items()}
        w0 = time.perf_counter()
        with Pinger(targets) as idle_pings:
            time.sleep(idle_seconds)
        wall = time.perf_counter() - w0
        idle_cpu = {n: 100.0 * (_cpu_s(p) - cpu0[n]) / wall for n, p in pids.items()}
        deletes = []
        for t in names[:5]:
            t1 = time.perf_counter()
            admin.delete_topics([t], operation_timeout=60, request_timeout=90)[t].result(120)
            deletes.append(1000.0 * (time.perf_counter() - t1))
        logs = {n: node.log_path.read_text(errors="replace") for n, node in cluster.nodes.items()}
    stalls = {
        n: max([float(m) for m in re.findall(r"did not run for ([0-9.]+) s", text)], default=0.0)
        for n, text in logs.items()
    }
    return {
        "create_accepted_s": accepted_s,
        "create_s": create_s,
        "create_retries": retries,
        "logs_ready_s": logs_ready_s,
        "create_rtt_max_ms": {n: max(s) for n, s in create_pings.samples.items()},
        "did_not_run_max_s": stalls,
        "idle_cpu_pct": idle_cpu,
        "idle_rtt_median_ms": {n: statistics.median(s) for n, s in idle_pings.samples.items()},
        "idle_rtt_max_ms": {n: max(s) for n, s in idle_pings.samples.items()},
        "heartbeat_warnings": sum(len(re.findall(r"no heartbeat (?:answered )?for", text)) for text in logs.values()),
        "drift_rebuilds": sum(text.count("drifted") for text in logs.values()),
        "delete_ms_median": statistics.median(deletes),
        "delete_ms_max": max(deletes),
    }


def _flat(run: dict[str, Any]) -> dict[str, float]:
    """Per-node figures folded to max over nodes (idle CPU: max and mean)."""
    flat: dict[str, float] = {}
    for k, v in run.items():
        if isinstance(v, dict):
            vals = [float(x) for x in v.values()]
            flat[k + "_max_node"] = max(vals)
            if k == "idle_cpu_pct":
                flat[k + "_mean_node"] = statistics.mean(vals)
        else:
            flat[k] = float(v)
    return flat


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    flats = [_flat(r) for r in runs]
    return {
        k: {"median": statistics.median(f[k] for f in flats), "min": min(f[k] for f in flats), "max": max(f[k] for f in flats)}
        for k in flats[0]
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--topics", type=int, default=400)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--vs-tree", type=Path, help="another kafkapy tree, run alternately (B)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.topics, args.partitions, args.idle_seconds)))
        return 0
    trees = {"A": ROOT} | ({"B": args.vs_tree.resolve()} if args.vs_tree else {})
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for i in range(args.runs):
        for label, tree in trees.items():
            run = _child(args, tree)
            results[label].append(run)
            print(f"run {i + 1} {label} ({tree}): {json.dumps(run)}", flush=True)
    print(f"\n{args.topics} topics x {args.partitions} partitions, RF 3, 3 nodes, {args.runs} runs: median [min-max]")
    summaries = {label: _summary(runs) for label, runs in results.items()}
    for key in summaries["A"]:
        row = "  ".join(
            f"{label}={s[key]['median']:9.1f} [{s[key]['min']:.1f}-{s[key]['max']:.1f}]" for label, s in summaries.items()
        )
        print(f"  {key:28s} {row}")
    if args.json:
        args.json.write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "summary": summaries, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
