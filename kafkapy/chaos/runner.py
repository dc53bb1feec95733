"""A chaos run: start a cluster, run the workloads, inject the scheduled faults, read back, check.

The cluster is the issue's setup: every topic RF 3 with min.insync.replicas 2, the internal
topics RF 3 (min ISR 2 for the transaction log), and Kafka's default timeouts (the test
harness's shortened ones are put back), plus whatever `--config` adds. Each fault is healed
before the next starts and the cluster must be whole again (every node ready, every node's
Metadata listing every broker) - bounded by `RECOVERY_TIMEOUT_S`; a recovery that times out is
recorded in the fault's detail and the run goes on. Then every workload must have made progress
since the heal (`PROGRESS_TIMEOUT_S`): the time each took is the fault's `resumed` figure.

Every exit path (an error, Ctrl-C, SIGTERM) heals what is in effect - SIGCONT, iptables rules
removed, fill file deleted - stops the cluster, removes the chain and cgroups, and unmounts.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkapy.chaos.checker import CheckResult, check
from kafkapy.chaos.faults import ChaosCluster, DiskFill, NetworkIsolation, remove_stale
from kafkapy.chaos.history import (
    ACKS1,
    GROUP_CONSUMERS,
    GROUP_TXN,
    IDEMPOTENT,
    TOPIC_ACKS1,
    TOPIC_IDEMPOTENT,
    TOPIC_TXN_OUT,
    FaultRecord,
    History,
)
from kafkapy.chaos.schedule import FaultSpec, build_schedule
from kafkapy.chaos.workloads import GroupMember, ProducerWorkload, TxnProcessor, Workload
from kafkapy.testing.cluster import ClusterStartError

__all__ = ["CLUSTER_SETTINGS", "ChaosOptions", "ChaosRun", "RunOutcome"]

log = logging.getLogger("kafkapy.chaos")

PARTITIONS = 3
#: the issue's setup; the timeouts are Kafka's defaults (ClusterProcesses shortens them)
CLUSTER_SETTINGS: dict[str, str] = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
    "group.initial.rebalance.delay.ms": "3000",
    "auto.create.topics.enable": "false",
}
RECOVERY_TIMEOUT_S = 90.0
#: after the cluster is whole again, how long the next fault waits for every workload to make
#: progress (acks on every partition, a committed transaction, a group commit): each fault's
#: effect is then its own (a fault injected while the last one's effect lasts would be blamed
#: for it), and how long each workload took to resume after each heal is measured
PROGRESS_TIMEOUT_S = 60.0
SETUP_TIMEOUT_S = 60.0
FINAL_READ_TIMEOUT_S = 60.0
#: how long the workloads run on after the last fault is healed
TAIL_S = 5.0


@dataclass
class ChaosOptions:
    nodes: int = 3
    seed: int = 0
    duration_s: float = 150.0
    kinds: tuple[str, ...] = ()
    config: dict[str, str] = field(default_factory=dict)
    base_dir: Path | None = None
    keep: bool = False
    disk_mib: int = 256
    rate_per_s: float = 50.0
    #: librdkafka `debug` contexts for every workload client (None: off)
    client_debug: str | None = None
    progress: Callable[[str], None] = print


@dataclass
class RunOutcome:
    options: ChaosOptions
    schedule: list[FaultSpec]
    history: History
    result: CheckResult
    skipped: dict[str, str]
    base_dir: Path
    elapsed_s: float
    stuck_workloads: list[str]


def _client_logger(path: Path, *, debug: bool = False) -> logging.Logger:
    """A logger writing librdkafka's messages to `path` only (they are many during faults);
    with `debug` its debug lines too (`--client-debug`)."""
    logger = logging.getLogger(f"kafkapy.chaos.clients.{path}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    if not logger.handlers:
        handler = logging.FileHandler(path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
    return logger


class _Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into an exception so the cleanup runs as for Ctrl-C."""


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Interrupted()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class ChaosRun:
    """One run (see the module doc); `run()` returns the outcome, the caller reports it."""

    def __init__(self, options: ChaosOptions) -> None:
        self.options = options
        self.schedule = build_schedule(options.seed, options.duration_s, options.kinds)
        self.history = History(partitions=PARTITIONS)
        self.network = NetworkIsolation()
        self.disk = DiskFill(options.disk_mib)
        self.skipped: dict[str, str] = {}
        self.processes: ChaosCluster | None = None
        self.t0 = time.monotonic()
        self.stopped: set[int] = set()
        self.filled: Path | None = None
        #: added to every client's config: librdkafka's log goes to <data dir>/clients.log
        self.client_extra: dict[str, Any] = {}

    def clock(self) -> float:
        return time.monotonic() - self.t0

    def say(self, text: str) -> None:
        self.options.progress(f"[{self.clock():7.1f}s] {text}")

    # -- set-up -----------------------------------------------------------------------------------
    def _capabilities(self) -> None:
        for stale in remove_stale():
            self.say(f"removed a stale leftover of an earlier run: {stale}")
        if "partition" in self.options.kinds:
            reason = self.network.unavailable()
            if reason:
                self.skipped["partition"] = reason
        if "disk-full" in self.options.kinds:
            reason = self.disk.unavailable()
            if reason:
                self.skipped["disk-full"] = reason
        for kind, reason in self.skipped.items():
            self.options.progress(f"skipping fault {kind}: {reason}")

    def _start_cluster(self, base: Path) -> ChaosCluster:
        isolate = "partition" in self.options.kinds and "partition" not in self.skipped
        if isolate:
            self.network.set_up(list(range(1, self.options.nodes + 1)))
        overrides = {**CLUSTER_SETTINGS, **self.options.config}
        cluster = ChaosCluster(
            base, self.options.nodes, overrides=overrides, isolation=self.network if isolate else None
        )
        if "disk-full" in self.options.kinds and "disk-full" not in self.skipped:
            for node in cluster.nodes.values():
                self.disk.mount(node.data_dir)
        self.processes = cluster
        cluster.start()
        return cluster

    def _create_topics(self, admin: AdminClient) -> None:
        topics = [NewTopic(t, PARTITIONS, 3) for t in (TOPIC_IDEMPOTENT, TOPIC_ACKS1, TOPIC_TXN_OUT)]
        for topic, future in admin.create_topics(topics, request_timeout=30).items():
            try:
                future.result(SETUP_TIMEOUT_S)
            except Exception as e:
                raise ClusterStartError(f"CreateTopics {topic}: {e}") from e
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        while time.monotonic() < deadline:
            md = admin.list_topics(timeout=10)
            ready = all(
                t in md.topics and len(md.topics[t].partitions) == PARTITIONS
                and all(p.leader >= 0 and len(p.isrs) == 3 for p in md.topics[t].partitions.values())
                for t in (TOPIC_IDEMPOTENT, TOPIC_ACKS1, TOPIC_TXN_OUT)
            )
            if ready:
                return
            time.sleep(0.5)
        raise ClusterStartError("the chaos topics never had a leader and a full ISR")

    def _workloads(self, bootstrap: str) -> list[Workload]:
        rate = self.options.rate_per_s
        extra = self.client_extra
        common = {"message.timeout.ms": 120000, "linger.ms": 5, **extra}
        return [
            ProducerWorkload(
                IDEMPOTENT, self.history, self.clock, bootstrap=bootstrap, topic=TOPIC_IDEMPOTENT,
                partitions=PARTITIONS, rate_per_s=rate,
                config={**common, "acks": "all", "enable.idempotence": True},
            ),
            ProducerWorkload(
                ACKS1, self.history, self.clock, bootstrap=bootstrap, topic=TOPIC_ACKS1,
                partitions=PARTITIONS, rate_per_s=rate / 2,
                config={**common, "acks": 1, "enable.idempotence": False},
            ),
            TxnProcessor(self.history, self.clock, bootstrap=bootstrap, extra=extra),
            GroupMember("group-a", self.history, self.clock, bootstrap=bootstrap, extra=extra),
            GroupMember("group-b", self.history, self.clock, bootstrap=bootstrap, extra=extra),
        ]

    # -- faults -----------------------------------------------------------------------------------
    def _leaders(self, admin: AdminClient) -> tuple[dict[int, int], int]:
        """Leader of each partition of the idempotent topic and the controller id clients
        are told (the Raft leader in a healthy cluster)."""
        md = admin.list_topics(TOPIC_IDEMPOTENT, timeout=10)
        topic = md.topics.get(TOPIC_IDEMPOTENT)
        leaders = {} if topic is None else {p: m.leader for p, m in topic.partitions.items()}
        return leaders, md.controller_id

    def _inject(self, spec: FaultSpec, admin: AdminClient) -> FaultRecord:
        assert self.processes is not None
        cluster = self.processes
        try:
            leaders, controller = self._leaders(admin)
        except Exception as e:  # no metadata: fall back to a node by pick
            leaders, controller = {}, -1
            self.say(f"metadata before fault {spec.index} failed: {e}")
        partition = spec.pick % PARTITIONS
        node_ids = sorted(cluster.nodes)
        target = leaders.get(partition, -1)
        if target not in cluster.nodes:
            target = node_ids[spec.pick % len(node_ids)]
        if spec.kind == "controller":
            target = controller if controller in cluster.nodes else target
        nodes = [target]
        if spec.kind == "two-down":
            others = [n for n in node_ids if n != target]
            nodes.append(others[(spec.pick // PARTITIONS) % len(others)])
        led = sorted(p for p, leader in leaders.items() if leader in nodes)
        record = FaultRecord(spec.index, spec.kind, nodes, led, self.clock())
        if spec.kind in self.skipped:
            record.skipped = self.skipped[spec.kind]
            return record
        self.say(f"fault {spec.index}: {spec.kind} node(s) {nodes} (leading {led}) for {spec.hold_s}s")
        if spec.kind in ("kill", "controller", "two-down"):
            for n in nodes:
                cluster.kill(n)
        elif spec.kind == "pause":
            proc = cluster.nodes[target].proc
            if proc is not None:
                proc.send_signal(signal.SIGSTOP)
                self.stopped.add(target)
        elif spec.kind == "partition":
            self.network.isolate(target, cluster.ports(target))
        elif spec.kind == "disk-full":
            self.filled = cluster.nodes[target].data_dir
            written = self.disk.fill(self.filled)
            record.detail = f"filled {written // (1 << 20)} MiB"
        record.injected_at = self.clock()
        return record

    def _heal(self, record: FaultRecord) -> None:
        """Undo whatever is in effect (also the cleanup path: safe to call when nothing is)."""
        assert self.processes is not None
        for n in sorted(self.stopped):
            proc = self.processes.nodes[n].proc
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
        self.stopped.clear()
        if self.network.isolated:
            self.network.heal()
        if self.filled is not None:
            self.disk.free(self.filled)
            self.filled = None
        record.healed_at = self.clock()
        for n in record.nodes:
            node = self.processes.nodes[n]
            if not node.is_running():
                if record.kind == "disk-full" and node.proc is not None:
                    record.detail += f"; node {n} exited with code {node.proc.returncode} on the full disk"
                self.processes.spawn(n)

    def _recover(self, record: FaultRecord) -> None:
        assert self.processes is not None
        try:
            self.processes.wait_ready(*record.nodes, timeout_s=RECOVERY_TIMEOUT_S)
            self.processes.wait_settled(timeout_s=RECOVERY_TIMEOUT_S)
        except ClusterStartError as e:
            first = str(e).splitlines()[0]
            record.detail = f"{record.detail}; not recovered: {first}".lstrip("; ")
            self.say(f"fault {record.index}: cluster not whole after {RECOVERY_TIMEOUT_S}s: {first}")
        record.recovered_at = self.clock()

    def _run_schedule(self, admin: AdminClient) -> None:
        for spec in self.schedule:
            wait = spec.at_s - self.clock()
            if wait > 0:
                time.sleep(wait)
            record = self._inject(spec, admin)
            self.history.faults.append(record)
            if record.skipped is not None:
                self.say(f"fault {spec.index}: {spec.kind} skipped ({record.skipped})")
                time.sleep(spec.hold_s)
                continue
            try:
                time.sleep(spec.hold_s)
            finally:
                self._heal(record)
            self._recover(record)
            self._await_progress(record)
            self.say(
                f"fault {spec.index}: healed at {record.healed_at:.1f}s, whole again at {record.recovered_at:.1f}s, "
                f"workloads resumed after {_resumed_text(record.resumed)}"
                + (f" ({record.detail})" if record.detail else "")
            )

    def _await_progress(self, record: FaultRecord) -> None:
        """Until every workload progressed since the heal, at most `PROGRESS_TIMEOUT_S`."""
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while True:
            record.resumed = self.history.progress_since(record.healed_at)
            if all(v is not None for v in record.resumed.values()) or time.monotonic() >= deadline:
                return
            time.sleep(0.2)

    # -- read-back --------------------------------------------------------------------------------
    def _read_topic(self, bootstrap: str, topic: str, isolation: str) -> None:
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"chaos-verify-{topic}",
            "enable.auto.commit": False, "isolation.level": isolation,
            "enable.partition.eof": True, "auto.offset.reset": "earliest", **self.client_extra,
        })
        records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        try:
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20, cached=False)[1]
                for p in range(PARTITIONS)
            }
            consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
            reached: dict[int, int] = {}
            deadline = time.monotonic() + FINAL_READ_TIMEOUT_S
            while time.monotonic() < deadline and any(reached.get(p, -1) < ends[p] for p in ends):
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        reached[msg.partition() or 0] = msg.offset() or 0
                    continue
                records[msg.partition() or 0].append((msg.offset() or 0, msg.value() or b""))
            for p, end in sorted(ends.items()):
                if reached.get(p, -1) < end:
                    self.history.read_errors.append(
                        f"{topic}[{p}] ({isolation}): read up to {reached.get(p, 'nothing')} of high watermark {end}"
                    )
        except Exception as e:
            self.history.read_errors.append(f"{topic} ({isolation}): final read failed: {e}")
        finally:
            consumer.close()
        self.history.set_read(topic, records)

    def _committed(self, bootstrap: str, group: str) -> dict[int, int]:
        """The group's committed offsets, stable ones (librdkafka's read_committed default
        asks for them: an open transaction holding offsets for the group makes the broker
        answer UNSTABLE_OFFSET_COMMIT). Two tries of 30 s: more than a transaction timeout
        (15 s) plus Kafka's cleanup interval of timed-out transactions (10 s)."""
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False, **self.client_extra}
        )
        tps = [TopicPartition(TOPIC_IDEMPOTENT, p) for p in range(PARTITIONS)]
        try:
            for attempt in (1, 2):
                try:
                    return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=30) if tp.offset >= 0}
                except Exception as e:
                    if attempt == 2:
                        self.history.read_errors.append(f"committed offsets of group {group} (60 s): {e}")
            return {}
        finally:
            consumer.close()

    def _read_back(self, bootstrap: str) -> None:
        self._read_topic(bootstrap, TOPIC_IDEMPOTENT, "read_uncommitted")
        self._read_topic(bootstrap, TOPIC_ACKS1, "read_uncommitted")
        self._read_topic(bootstrap, TOPIC_TXN_OUT, "read_committed")
        for group in (GROUP_TXN, GROUP_CONSUMERS):
            self.history.group_committed[group] = self._committed(bootstrap, group)

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> RunOutcome:
        self._capabilities()
        base = self.options.base_dir or Path(tempfile.mkdtemp(prefix="kafkapy-chaos-"))
        base.mkdir(parents=True, exist_ok=True)
        debug = bool(self.options.client_debug)
        self.client_extra = {"logger": _client_logger(base / "clients.log", debug=debug)}
        if debug:
            self.client_extra["debug"] = self.options.client_debug
        workloads: list[Workload] = []
        stuck: list[str] = []
        horizon = 0.0
        anomalies = True
        try:
            with _sigterm_raises():
                self.say(f"starting {self.options.nodes} nodes in {base}")
                cluster = self._start_cluster(base)
                admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **self.client_extra})
                self._create_topics(admin)
                self.t0 = time.monotonic()
                workloads = self._workloads(cluster.bootstrap)
                for w in workloads:
                    w.start()
                self.say(f"workloads running; {len(self.schedule)} faults scheduled (seed {self.options.seed})")
                self._run_schedule(admin)
                time.sleep(TAIL_S)
                horizon = self.clock()
                for w in workloads:
                    if not w.stop():
                        stuck.append(w.workload)
                self.say("workloads stopped; reading back")
                self._read_back(cluster.bootstrap)
                result = check(self.history, horizon)
                anomalies = result.total_anomalies() > 0
        finally:
            for w in workloads:
                w.stopping.set()
            self._cleanup(keep_data=self.options.keep or anomalies)
            with contextlib.suppress(OSError):
                self.history.dump(base / "history.jsonl")
            if not self.options.keep and not anomalies and self.options.base_dir is None:
                shutil.rmtree(base, ignore_errors=True)
        return RunOutcome(
            self.options, self.schedule, self.history, result, self.skipped, base, self.clock(), stuck
        )

    def _cleanup(self, *, keep_data: bool = False) -> None:
        """Heal, stop the nodes, remove the rules; with `keep_data` the tmpfs data dirs are
        copied out (`nodeN.kept`) before they are unmounted."""
        if self.processes is not None:
            with contextlib.suppress(Exception):
                self._heal(FaultRecord(-1, "cleanup", [], [], self.clock()))
            self.processes.stop()
        self.network.close()
        if keep_data:
            self.disk.keep_copies()
        self.disk.close()


def _resumed_text(resumed: dict[str, float | None]) -> str:
    """'acks 0.4 s, txn 1.2 s, group never' for the progress line."""
    return ", ".join(
        f"{k} {'-' if v is None else f'{v:.1f} s'}" for k, v in resumed.items()
    )


def outcome_json(outcome: RunOutcome) -> dict[str, Any]:
    """The machine-readable report (`--json`)."""
    o = outcome.options
    ran = [f for f in outcome.history.faults if f.skipped is None]
    return {
        "seed": o.seed, "nodes": o.nodes, "duration_s": o.duration_s, "kinds": list(o.kinds),
        "elapsed_s": round(outcome.elapsed_s, 1), "data_dir": str(outcome.base_dir),
        "faults_injected": len(ran),
        "fault_kinds_injected": sorted({f.kind for f in ran}),
        "skipped_kinds": outcome.skipped,
        "schedule": [s.to_json() for s in outcome.schedule],
        "faults": [f.to_json() for f in outcome.history.faults],
        "progress_timeout_s": PROGRESS_TIMEOUT_S,
        "stuck_workloads": outcome.stuck_workloads,
        "client_errors": dict(sorted(outcome.history.client_errors.items(), key=lambda kv: -kv[1])[:30]),
        **outcome.result.to_json(),
    }
