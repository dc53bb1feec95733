"""Many partitions on a three-node cluster or on one node: CreateTopics, loop stalls, idle cost,
RSS, fail-over, restart.

Usage:
    perf/cluster_scale_bench.py [--runs N] [--topics N] [--partitions P] [--idle-seconds S]
                                [--single-node] [--no-failover] [--rate R] [--py-spy PATH]
                                [--vs-tree PATH] [--json PATH]

Cluster mode (default): three combined broker + controller subprocess nodes
(kafkapy.testing.cluster) with Kafka's default timing configs (`broker.session.timeout.ms` 9000,
`broker.heartbeat.interval.ms` 2000, `replica.lag.time.max.ms` 30000; identical for A and B, so
idle CPU can only fall because less work is done), one CreateTopics of N topics x P partitions
at replication factor 3, an idle period, DeleteTopics of five topics, then the fail-overs
(perf/scale_failover.py): SIGTERM of the node leading the most partitions, restart and full ISR
again, SIGKILL of the node then leading the most. Single-node mode (`--single-node`, default
2,000 topics x 1 partition): one node, one CreateTopics at RF 1, the idle period, then a clean
stop and a restart.

The CreateTopics comes from confluent-kafka with the client's default timeouts and is sent once:
`create_retries` and `create_timeouts` are librdkafka's own counts (its `txretries` and
`req_timeouts` statistics), `create_already_exists` the topics answered TOPIC_ALREADY_EXISTS
(only a retried request gets that here) and `create_errors` any other error; all four must be 0.

Figures per run:
- `create_answer_s`: the CreateTopics call until every topic's answer; `create_s`: until every
  partition has a leader and a full ISR (None: not within 300 s); `logs_ready_s`: until every node
  has every replica's log directory (the idle period starts 2 s after that);
- `create_rtt_max_ms` per node: the longest round trip of an ApiVersions request sent every 100 ms
  to the node's controller listener (cluster; the loop lag a BrokerHeartbeat sees) or broker
  listener (single node; what another client sees) while the topics are created;
  `did_not_run_max_s`: the longest "did not run for" the node logged;
- `idle_cpu_pct` per node: CPU share (% of one core) over --idle-seconds after the ISR is full;
  `idle_rtt_median_ms` / `idle_rtt_max_ms` over that period; `rss_mb` per node after it;
- `heartbeat_warnings`: log lines about late heartbeats; `delete_ms`: DeleteTopics of one topic;
- cluster: `term_*` / `kill_*` from perf/scale_failover.py (`moved_s`, `writes_s`, `gone_s`,
  `failed`, `partitions_moved`);
- single node: `restart_ready_s` (spawn to the ready line) and `restart_led_s` (spawn until
  Metadata shows a leader for every partition) after a clean stop;
- `loadavg`: the machine's 1-minute load average at the start and at the end of the run (the
  figures move several-fold with load; compare A and B of one invocation).

`--vs-tree PATH` alternates runs with another source tree's kafkapy (A/B in one machine window):
run A uses this tree, run B the other, per round; both run this file's scenario. `--py-spy PATH`
records node 1 over the idle period with py-spy (`--format raw`, perf/profile_summary.py reads
it). Every wait is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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
#: Kafka's defaults for every timing config the scenario exercises (the test harness shortens them)
KAFKA_TIMING = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
}
CLUSTER_OVERRIDES = {**KAFKA_TIMING, "min.insync.replicas": "2"}
SINGLE_OVERRIDES = {
    **KAFKA_TIMING,
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
WAIT_S = 300.0


def _child(args: argparse.Namespace, tree: Path, label: str) -> dict[str, Any]:
    """Run one measurement in a child interpreter whose kafkapy comes from `tree`."""
    cmd = [
        sys.executable, str(PERF / "cluster_scale_bench.py"), "--one",
        "--topics", str(args.topics), "--partitions", str(args.partitions),
        "--idle-seconds", str(args.idle_seconds), "--rate", str(args.rate),
    ]
    cmd += ["--single-node"] if args.single_node else []
    cmd += ["--no-failover"] if args.no_failover else []
    cmd += ["--py-spy", f"{args.py_spy}.{label}"] if args.py_spy else []
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, timeout=1800, check=False)
    if out.returncode != 0:
        raise SystemExit(f"run in {tree} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


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


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def create_once(bootstrap: str, new: list[Any]) -> dict[str, Any]:
    """One CreateTopics with the client's defaults; the answer time and what went wrong."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    stats: list[str] = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "statistics.interval.ms": 500, "stats_cb": stats.append})
    t0 = time.perf_counter()
    exists = errors = 0
    first_error = ""
    for fut in admin.create_topics(new).values():
        try:
            fut.result(WAIT_S)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                exists += 1
            else:
                errors += 1
                first_error = first_error or str(exc.args[0])
        except Exception as exc:  # a future that never resolved is an error too
            errors += 1
            first_error = first_error or repr(exc)
    answer_s = time.perf_counter() - t0
    seen = len(stats)
    deadline = time.monotonic() + 3.0
    while len(stats) == seen and time.monotonic() < deadline:
        admin.poll(0.2)
    brokers = json.loads(stats[-1])["brokers"].values() if stats else []
    return {
        "create_answer_s": answer_s,
        "create_retries": sum(b.get("txretries", 0) for b in brokers),
        "create_timeouts": sum(b.get("req_timeouts", 0) for b in brokers),
        "create_already_exists": exists,
        "create_errors": errors,
        "create_first_error": first_error,
    }


def wait_led(admin: Any, names: list[str], partitions: int, isr: int, t0: float) -> float | None:
    """Seconds from `t0` until every partition has a leader and `isr` in-sync replicas."""
    while time.perf_counter() < t0 + WAIT_S:
        try:
            md = admin.list_topics(timeout=30).topics
        except Exception:  # a node restarting: ask again
            time.sleep(0.5)
            continue
        if all(
            t in md and len(md[t].partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) >= isr for p in md[t].partitions.values())
            for t in names
        ):
            return time.perf_counter() - t0
        time.sleep(0.5)
    return None


def wait_logs(data_dirs: list[Path], replicas: int, t0: float) -> float | None:
    """Seconds from `t0` until every data dir holds `replicas` scale-* log directories."""
    while time.perf_counter() < t0 + WAIT_S:
        if all(sum(1 for d in p.iterdir() if d.name.startswith("scale-")) >= replicas for p in data_dirs):
            return time.perf_counter() - t0
        time.sleep(0.2)
    return None


def _py_spy(pid: int, seconds: float, path: str) -> subprocess.Popen[bytes] | None:
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    cmd = [exe, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "50", "-f", "raw", "-o", path]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if Path(exe).exists() else None


def idle_phase(pids: dict[int, int], targets: dict[int, tuple[str, int]], seconds: float, py_spy: str | None) -> dict[str, Any]:
    """CPU share, round trips and RSS per node over an idle period (py-spy on node 1 if asked)."""
    spy = _py_spy(pids[min(pids)], seconds, py_spy) if py_spy else None
    cpu0 = {n: _cpu_s(p) for n, p in pids.items()}
    w0 = time.perf_counter()
    with Pinger(targets) as pings:
        time.sleep(seconds)
    wall = time.perf_counter() - w0
    if spy is not None:
        spy.wait(60)
    return {
        "idle_cpu_pct": {n: 100.0 * (_cpu_s(p) - cpu0[n]) / wall for n, p in pids.items()},
        "idle_rtt_median_ms": {n: statistics.median(s) for n, s in pings.samples.items()},
        "idle_rtt_max_ms": {n: max(s) for n, s in pings.samples.items()},
        "rss_mb": {n: _rss_mb(p) for n, p in pids.items()},
    }


def log_figures(logs: dict[int, str]) -> dict[str, Any]:
    """Stalls and late heartbeats the nodes logged."""
    return {
        "did_not_run_max_s": {
            n: max([float(m) for m in re.findall(r"did not run for ([0-9.]+) s", text)], default=0.0)
            for n, text in logs.items()
        },
        "heartbeat_warnings": sum(len(re.findall(r"no heartbeat (?:answered )?for", text)) for text in logs.values()),
        "drift_rebuilds": sum(text.count("drifted") for text in logs.values()),
    }


def _deletes(admin: Any, names: list[str]) -> dict[str, float]:
    deletes = []
    for t in names:
        t1 = time.perf_counter()
        admin.delete_topics([t], operation_timeout=60, request_timeout=90)[t].result(120)
        deletes.append(1000.0 * (time.perf_counter() - t1))
    return {"delete_ms_median": statistics.median(deletes), "delete_ms_max": max(deletes)}


def _create_phase(cluster: Any, names: list[str], partitions: int, rf: int, ports: dict[int, tuple[str, int]]) -> dict[str, Any]:
    """CreateTopics once with another client's pings timed, then wait for leaders, ISR, logs."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    with Pinger(ports) as pings:
        t0 = time.perf_counter()
        run = create_once(cluster.bootstrap, [NewTopic(t, num_partitions=partitions, replication_factor=rf) for t in names])
        run["create_s"] = wait_led(admin, names, partitions, rf, t0)
        data_dirs = [node.data_dir for node in cluster.nodes.values()]
        run["logs_ready_s"] = wait_logs(data_dirs, len(names) * partitions, t0)
    run["create_rtt_max_ms"] = {n: max(s) for n, s in pings.samples.items()}
    return run


def cluster_run(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
    from scale_failover import failover

    from kafkapy.testing.cluster import ClusterProcesses

    names = [f"scale-{i}" for i in range(args.topics)]
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp, ClusterProcesses(
        Path(tmp), 3, overrides=CLUSTER_OVERRIDES
    ) as cluster:
        ports = {n: (node.host, node.controller_port) for n, node in cluster.nodes.items()}
        run = _create_phase(cluster, names, args.partitions, 3, ports)
        time.sleep(2.0)
        pids = {n: node.proc.pid for n, node in cluster.nodes.items() if node.proc is not None}
        run |= idle_phase(pids, ports, args.idle_seconds, args.py_spy)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        run |= _deletes(admin, names[:5])
        names = names[5:]
        if not args.no_failover:
            run |= {f"term_{k}": v for k, v in failover(cluster, admin, names, "term", args.rate).items()}
            cluster.restart(run["term_victim"])
            run["rejoin_isr_s"] = wait_led(admin, names, args.partitions, 3, time.perf_counter())
            run |= {f"kill_{k}": v for k, v in failover(cluster, admin, names, "kill", args.rate).items()}
        logs = {n: node.log_path.read_text(errors="replace") for n, node in cluster.nodes.items()}
    return run | log_figures(logs)


def single_run(args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    from kafkapy.testing.cluster import ClusterProcesses

    names = [f"scale-{i}" for i in range(args.topics)]
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp, ClusterProcesses(
        Path(tmp), 1, overrides=SINGLE_OVERRIDES
    ) as cluster:
        node = cluster.nodes[1]
        ports = {1: (node.host, node.broker_port)}
        run = _create_phase(cluster, names, args.partitions, 1, ports)
        time.sleep(2.0)
        assert node.proc is not None
        run |= idle_phase({1: node.proc.pid}, ports, args.idle_seconds, args.py_spy)
        cluster.terminate(1)
        t0 = time.perf_counter()
        cluster.spawn(1)
        cluster.wait_ready(1, timeout_s=WAIT_S)
        run["restart_ready_s"] = time.perf_counter() - t0
        run["restart_led_s"] = wait_led(AdminClient({"bootstrap.servers": cluster.bootstrap}), names, args.partitions, 1, t0)
        logs = {1: node.log_path.read_text(errors="replace")}
    return run | log_figures(logs)


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    load0 = os.getloadavg()[0]
    run = single_run(args) if args.single_node else cluster_run(args)
    return run | {"loadavg_start": load0, "loadavg_end": os.getloadavg()[0]}


def _flat(run: dict[str, Any]) -> dict[str, float]:
    """Numeric figures, per-node ones folded to max over nodes (idle CPU and RSS: max and mean);
    a figure that never came (None) counts as infinite."""
    flat: dict[str, float] = {}
    for k, v in run.items():
        if isinstance(v, dict):
            vals = [float(x) for x in v.values()]
            flat[k + "_max_node"] = max(vals)
            if k in ("idle_cpu_pct", "rss_mb"):
                flat[k + "_mean_node"] = statistics.mean(vals)
        elif v is None:
            flat[k] = float("inf")
        elif isinstance(v, (int, float)):
            flat[k] = float(v)
    return flat


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    flats = [_flat(r) for r in runs]
    keys = [k for k in flats[0] if all(k in f for f in flats)]
    return {
        k: {"median": statistics.median(f[k] for f in flats), "min": min(f[k] for f in flats), "max": max(f[k] for f in flats)}
        for k in keys
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--topics", type=int, default=None, help="default 400 (cluster), 2000 (single node)")
    ap.add_argument("--partitions", type=int, default=None, help="default 4 (cluster), 1 (single node)")
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--single-node", action="store_true", help="one node at RF 1, then a restart")
    ap.add_argument("--no-failover", action="store_true", help="skip the SIGTERM / SIGKILL fail-overs")
    ap.add_argument("--rate", type=float, default=1000.0, help="records/s of the fail-over producer")
    ap.add_argument("--py-spy", help="record node 1 with py-spy over the idle period into PATH.<A|B>")
    ap.add_argument("--vs-tree", type=Path, help="another kafkapy tree, run alternately (B)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.topics = args.topics or (2000 if args.single_node else 400)
    args.partitions = args.partitions or (1 if args.single_node else 4)
    if args.one:
        print(json.dumps(one_run(args)))
        return 0
    trees = {"A": ROOT} | ({"B": args.vs_tree.resolve()} if args.vs_tree else {})
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    for i in range(args.runs):
        for label, tree in trees.items():
            run = _child(args, tree, label)
            results[label].append(run)
            print(f"run {i + 1} {label} ({tree}): {json.dumps(run)}", flush=True)
    shape = "1 node, RF 1" if args.single_node else "3 nodes, RF 3"
    print(f"\n{args.topics} topics x {args.partitions} partitions, {shape}, {args.runs} runs: median [min-max]")
    summaries = {label: _summary(runs) for label, runs in results.items()}
    for key in summaries["A"]:
        row = "  ".join(
            f"{label}={s[key]['median']:9.1f} [{s[key]['min']:.1f}-{s[key]['max']:.1f}]" for label, s in summaries.items() if key in s
        )
        print(f"  {key:28s} {row}")
    if args.json:
        args.json.write_text(json.dumps({"trees": {k: str(v) for k, v in trees.items()}, "summary": summaries, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
