"""What a SIGKILL costs transactions and consumer groups on a three-node cluster (issue 12).

Two scenarios, each on a fresh subprocess cluster (kafkapy.testing.cluster, its quick failure
detection overrides), RF 3, min.insync.replicas 2, internal topics RF 3:

- `txn`: a confluent-kafka transactional producer commits small transactions (5 messages) to
  one partition in a loop; the leader of that partition (never the transaction coordinator)
  is SIGKILLed. Figure: the longest gap between two successful commits around the kill (the
  failover cost of a transaction), and whether the producer failed fatally.
- `group`: two confluent-kafka consumers in one classic group (session.timeout.ms 10000) read
  a topic a producer keeps writing, replicated on the two other nodes only; the group
  coordinator's node is SIGKILLed. Figures: the group's pause (longest gap between consumed messages
  around the kill) and how many rebalances (assignment callbacks) the kill caused.

    .venv/bin/python perf/coordinator_failover_bench.py [txn|group|both] [--runs 3]
        [--json perf/results/coordinator_failover_bench.json]

A/B against another tree: copy this script there and run it with that tree's interpreter path
(the cluster subprocesses run `python -m kafkapy` of the tree on sys.path).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkapy.coordinator.txn import partition_for
from kafkapy.testing.cluster import ClusterProcesses

OVERRIDES = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
#: --kafka-defaults: Kafka's failure detection instead of the test harness's quick one
KAFKA_DEFAULTS = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
}
AFTER_KILL_S = 30.0


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic, timeout=10)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def _create(admin: AdminClient, topic: str, partitions: int) -> None:
    futures = admin.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=30)
    futures[topic].result(timeout=30)


def _wait_leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    for _ in range(200):
        try:
            leaders = _leaders(admin, topic)
            if leaders and all(v >= 0 for v in leaders.values()):
                return leaders
        except Exception:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no leaders for {topic}")


def _fail(cluster: ClusterProcesses, node_id: int, how: str) -> None:
    """SIGKILL (a crash) or SIGSTOP (a hung process: connections stay open, nothing answers)."""
    if how == "kill":
        cluster.kill(node_id)
    else:
        proc = cluster.nodes[node_id].proc
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)


def run_txn(base: Path, how: str = "kill", overrides: dict[str, str] = OVERRIDES,
            protocol: str = "classic") -> dict[str, Any]:
    del protocol  # groups only
    with ClusterProcesses(base, 3, overrides=overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        _create(admin, "data", 3)
        tid = "bench-txn"
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                             "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000})
        producer.init_transactions(30)
        coordinator = _wait_leaders(admin, "__transaction_state")[partition_for(tid, 3)]
        leaders = _wait_leaders(admin, "data")
        partition = next(p for p, leader in sorted(leaders.items()) if leader != coordinator)
        victim = leaders[partition]
        commits: list[float] = []
        errors: list[str] = []
        fatal = ""
        killed_at = 0.0
        stop = time.monotonic() + 1e9
        n = 0
        while time.monotonic() < stop:
            if not killed_at and len(commits) >= 20:
                _fail(cluster, victim, how)
                killed_at = time.monotonic()
                stop = killed_at + AFTER_KILL_S
            try:
                producer.begin_transaction()
                for _ in range(5):
                    producer.produce("data", b"m%d" % n, partition=partition)
                    n += 1
                producer.commit_transaction(60)
                commits.append(time.monotonic())
            except KafkaException as exc:
                err = exc.args[0]
                errors.append(f"{time.monotonic() - killed_at:.1f}s {err}")
                if err.fatal():
                    fatal = str(err)
                    break
                if err.txn_requires_abort():
                    try:
                        producer.abort_transaction(60)
                    except KafkaException as abort_exc:
                        errors.append(f"abort: {abort_exc.args[0]}")
                        if abort_exc.args[0].fatal():
                            fatal = str(abort_exc.args[0])
                            break
        around = [t for t in commits if t >= killed_at - 5]
        gaps = [b - a for a, b in itertools.pairwise(around)]
        first_after = next((t - killed_at for t in commits if t > killed_at), None)
        return {
            "victim": victim, "coordinator": coordinator,
            "max_gap_s": round(max(gaps), 3) if gaps else None,
            "first_commit_after_kill_s": round(first_after, 3) if first_after is not None else None,
            "commits_after_kill": sum(1 for t in commits if t > killed_at),
            "fatal": fatal, "errors": errors[:5],
        }


class _Member:
    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
        if os.environ.get("BENCH_CLIENT_DEBUG"):  # e.g. cgrp: librdkafka's group log on stderr
            config["debug"] = os.environ["BENCH_CLIENT_DEBUG"]
        if protocol == "consumer":  # KIP-848: the session timeout is the broker's
            config["group.protocol"] = "consumer"
        else:
            config.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        self.consumer = Consumer(config)
        self.assignments: list[float] = []
        self.times: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_assign(self, consumer: Any, partitions: Any) -> None:
        self.assignments.append(time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                self.errors.append(str(msg.error()))
            else:
                self.times.append(time.monotonic())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def run_group(base: Path, how: str = "kill", overrides: dict[str, str] = OVERRIDES,
              protocol: str = "classic") -> dict[str, Any]:
    with ClusterProcesses(base, 3, overrides=overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        group = "bench-group"
        probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
        _create(admin, "probe", 1)
        probe.subscribe(["probe"])  # makes __consumer_offsets exist
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not probe.assignment():
            probe.poll(0.2)
        probe.close()
        coordinator = _wait_leaders(admin, "__consumer_offsets")[partition_for(group, 3)]
        # the data lives on the other two nodes only: the pause measured is the group's, not
        # the failover of partitions the victim leads or replicates
        a, b = (n for n in (1, 2, 3) if n != coordinator)
        futures = admin.create_topics([NewTopic(
            "feed", num_partitions=4, replica_assignment=[[a, b], [b, a], [a, b], [b, a]],
            config={"min.insync.replicas": "1"},
        )], operation_timeout=30)
        futures["feed"].result(timeout=30)
        _wait_leaders(admin, "feed")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5,
                             "topic.metadata.refresh.interval.ms": 1000})
        members = [_Member(cluster.bootstrap, group, "feed", protocol) for _ in range(2)]
        stop_feed = threading.Event()

        def feed() -> None:
            i = 0
            while not stop_feed.is_set():
                producer.produce("feed", b"f%d" % i, partition=i % 4)
                producer.poll(0)
                i += 1
                time.sleep(0.01)
            producer.flush(30)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not all(len(m.times) > 50 for m in members):
                time.sleep(0.2)
            time.sleep(2)
            _fail(cluster, coordinator, how)
            killed_at = time.monotonic()
            time.sleep(AFTER_KILL_S)
        finally:
            stop_feed.set()
            feeder.join(30)
            for m in members:
                m.close()
        times = sorted(t for m in members for t in m.times if t >= killed_at - 2)
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return {
            "victim": coordinator,
            "pause_s": round(max(gaps), 3) if gaps else None,
            "rebalances_after_kill": sum(1 for m in members for t in m.assignments if t > killed_at),
            "errors": [e for m in members for e in m.errors][:5],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["txn", "group", "both"], nargs="?", default="both")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--signal", choices=["kill", "stop"], default="kill",
                        help="SIGKILL the victim (default) or SIGSTOP it")
    parser.add_argument("--kafka-defaults", action="store_true",
                        help="Kafka's failure detection (9 s broker session, 30 s replica lag)")
    parser.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                        help="the group scenario's protocol (consumer: KIP-848)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep-logs", type=Path, help="copy the nodes' logs here")
    args = parser.parse_args()
    results: dict[str, list[dict[str, Any]]] = {}
    for name, run in (("txn", run_txn), ("group", run_group)):
        if args.scenario not in (name, "both"):
            continue
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix=f"coord-{name}-") as tmp:
                overrides = {**OVERRIDES, **(KAFKA_DEFAULTS if args.kafka_defaults else {})}
                result = run(Path(tmp), args.signal, overrides, args.group_protocol)
                if args.keep_logs is not None:
                    args.keep_logs.mkdir(parents=True, exist_ok=True)
                    for log_file in Path(tmp).glob("node*.log"):
                        (args.keep_logs / f"{name}-{i + 1}-{log_file.name}").write_bytes(log_file.read_bytes())
            print(f"{name} run {i + 1}: {result}", flush=True)
            results.setdefault(name, []).append(result)
    for name, runs in results.items():
        key = "max_gap_s" if name == "txn" else "pause_s"
        values = [r[key] for r in runs if r[key] is not None]
        if values:
            print(f"{name}: median {key} {statistics.median(values):.2f} s "
                  f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} runs)")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
