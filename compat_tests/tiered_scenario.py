"""Tiered storage end to end (KIP-405): the scenario `perf/tiered_scenario.py` runs at 1 GB and
`compat_tests/test_tiered_scenario.py` at about 50 MB, with the same ratios.

A three-node cluster (subprocesses) keeps a topic (RF 3, `remote.storage.enable=true`) in a real
S3 server (SeaweedFS or moto, a child process). Segments are `size / 128` and local retention
`size / 32`, so almost all of the log lives only in the bucket. The run, in order:

1. produce with acks=all, an aborted transaction near the start (in what becomes the tiered
   range); the object store is stopped for `outage_s` seconds in the middle of production.
   Meanwhile a raw Fetch of offset 0 answers UNKNOWN_SERVER_ERROR (Kafka's code for a remote
   read failure) and each client's behaviour is recorded (librdkafka reports and retries;
   kafka-python raises from `poll`, the caller polls again); produce goes on.
2. the copier catches up once the store is back: every broker's RemoteCopyLagBytes on /metrics
   is 0 and each node's data directory is under `size / 10.24` (100 MB at 1 GB).
3. confluent-kafka (read_committed) reads from offset 0; half way the partition's leader is
   SIGKILLed; the read completes from the new leader. Every acknowledged record must come back
   once, in offset order, byte-exact, and none of the aborted ones.
4. every node is stopped and started again; kafka-python (read_committed) reads everything
   again from offset 0.
5. `retention.bytes` is lowered with IncrementalAlterConfigs; the bucket listing (boto3) shows
   the remote objects of the expired segments gone and the log start offset moved.

`run` raises AssertionError on a violated promise and returns the figures.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import boto3
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError  # type: ignore[import-untyped]

from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import FetchRequest
from kafkapy.testing.cluster import ClusterProcesses, _exchange
from kafkapy.testing.object_store import TEST_ACCESS_KEY, TEST_SECRET_KEY, S3Server, ServerKind

__all__ = ["Scenario", "run"]

T = TypeVar("T")
MB = 1 << 20
UNKNOWN_SERVER_ERROR = -1


@dataclasses.dataclass(frozen=True)
class Scenario:
    """The run's size; every other size is a fixed ratio of `total_bytes`."""

    total_bytes: int
    outage_s: float
    value_bytes: int = 1000
    s3_kind: ServerKind = "seaweedfs"
    topic: str = "tiered-scenario"

    @property
    def segment_bytes(self) -> int:
        return self.total_bytes // 128

    @property
    def local_retention_bytes(self) -> int:
        return self.total_bytes // 32

    @property
    def disk_bound(self) -> int:
        """What each node's data directory must stay under once the copier caught up."""
        return int(self.total_bytes / 10.24)

    @property
    def records(self) -> int:
        return self.total_bytes // self.value_bytes

    @property
    def wait_s(self) -> float:
        """Generous bound for any one wait (2 busy cores, a cluster of subprocesses)."""
        return 120.0 + self.total_bytes / MB


def value_of(index: int, size: int) -> bytes:
    """Record `index`'s value: incompressible and derived from the index (no copy kept)."""
    block = hashlib.blake2b(index.to_bytes(8, "big"), digest_size=64).digest()
    return (block * (size // 64 + 1))[:size]


def wait_until(what: str, check: Callable[[], T | None], timeout_s: float) -> T:
    """Poll `check` until it returns a true value; AssertionError naming `what` otherwise."""
    deadline = time.monotonic() + timeout_s
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = check()
        except Exception as e:  # a client call failing mid-failover: try again
            got, error = None, e
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what} (last error {error!r})")


def cluster_overrides(s3: S3Server, prefix: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.s3.bucket.name": s3.bucket,
        "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        "rsm.config.key.prefix": prefix,
        "remote.log.manager.task.interval.ms": "500",
        "remote.log.manager.copier.retry.backoff.max.ms": "2000",
        "log.retention.check.interval.ms": "500",
    }


class Run:
    """One scenario run's state: cluster, store, what was acknowledged, the figures."""

    def __init__(self, sc: Scenario, cluster: ClusterProcesses, s3: S3Server, prefix: str) -> None:
        self.sc, self.cluster, self.s3, self.prefix = sc, cluster, s3, prefix
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        #: offset -> record index, for every acknowledged (committed) record
        self.acked: dict[int, int] = {}
        self.aborted: list[int] = []
        self.failed = 0
        #: the leader's RemoteCopyLagBytes once the store is back: (seconds, bytes) samples
        self.lag_after_outage: dict[str, Any] = {}
        self.figures: dict[str, Any] = {"total_mb": sc.total_bytes / MB, "outage_s": sc.outage_s,
                                        "segment_bytes": sc.segment_bytes,
                                        "local_retention_bytes": sc.local_retention_bytes,
                                        "disk_bound_bytes": sc.disk_bound}

    # -- cluster facts ----------------------------------------------------------------------------
    def leader(self) -> int:
        md = self.admin.list_topics(self.sc.topic, timeout=20)
        leader = md.topics[self.sc.topic].partitions[0].leader
        if leader not in self.cluster.live():
            raise RuntimeError(f"leader {leader} is not live")
        return int(leader)

    def in_sync(self) -> bool:
        md = self.admin.list_topics(self.sc.topic, timeout=20)
        part = md.topics[self.sc.topic].partitions[0]
        return part.leader in self.cluster.live() and len(part.isrs) == len(self.cluster.live())

    def metric(self, node: int, name: str) -> float | None:
        """`name{topic=...}` from node's /metrics (None when the node does not report it)."""
        port = self.cluster.nodes[node].http_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for line in text.splitlines():
            if line.startswith(name) and f'topic="{self.sc.topic}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return None

    def disk_bytes(self) -> dict[int, int]:
        """Bytes under each node's data directory (every file: logs, indexes, metadata log)."""
        return {n: sum(p.stat().st_size for p in node.data_dir.rglob("*") if p.is_file())
                for n, node in self.cluster.nodes.items()}

    def local_log_start(self, node: int) -> int:
        """The base offset of the node's oldest local segment of the partition."""
        logs = sorted((self.cluster.nodes[node].data_dir / f"{self.sc.topic}-0").glob("*.log"))
        return int(logs[0].name.split(".")[0]) if logs else 0

    def remote_keys(self) -> list[str]:
        """Every object of the topic in the bucket, by boto3 (not through kafkapy's client)."""
        client = boto3.client("s3", endpoint_url=self.s3.endpoint_url, region_name="us-east-1",
                              aws_access_key_id=TEST_ACCESS_KEY, aws_secret_access_key=TEST_SECRET_KEY)
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.s3.bucket, Prefix=f"{self.prefix}/"):
            keys += [o["Key"] for o in page.get("Contents", []) if f"/{self.sc.topic}-" in o["Key"]]
        return keys

    # -- production ---------------------------------------------------------------------------------
    def produce(self, producer: Producer, start: int, end: int, until: float | None = None) -> int:
        """Records [start, end) to partition 0, or up to the monotonic time `until`; acks
        recorded by offset. The index of the next record to produce."""
        size = self.sc.value_bytes

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed += 1
            else:
                self.acked[msg.offset()] = int.from_bytes(msg.key(), "big")

        i = start
        while i < end and (until is None or time.monotonic() < until):
            while True:
                try:
                    producer.produce(self.sc.topic, value_of(i, size), key=i.to_bytes(8, "big"),
                                     partition=0, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            i += 1
        assert producer.flush(self.sc.wait_s) == 0, "records still unacknowledged"
        return i

    def abort_a_transaction(self) -> None:
        """Records in a transaction that is aborted: read_committed consumers must skip them."""
        txn = Producer({"bootstrap.servers": self.cluster.bootstrap,
                        "transactional.id": f"t-{uuid.uuid4().hex[:8]}"})
        txn.init_transactions(60)
        txn.begin_transaction()
        offsets: list[int] = []
        for i in range(100):
            txn.produce(self.sc.topic, b"aborted-%d" % i, partition=0,
                        on_delivery=lambda err, msg: offsets.append(msg.offset()))
        txn.flush(60)
        txn.abort_transaction(60)
        self.aborted = sorted(offsets)

    def fetch_error_at_zero(self, node: int) -> int:
        """The error code a raw Fetch (v12, read_committed) of offset 0 gets from `node`: the
        first answer that is not empty (an empty one is the remote read running past
        `remote.fetch.max.wait.ms`, as Kafka's DelayedRemoteFetch expiring)."""
        deadline = time.monotonic() + 60
        while True:
            code, records = self._fetch_at_zero(node)
            assert not records, "records of offset 0 while the object store is down"
            if code != 0 or time.monotonic() > deadline:
                return code
            time.sleep(0.5)

    def _fetch_at_zero(self, node: int) -> tuple[int, bytes]:
        n = self.cluster.nodes[node]
        req = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=MB, isolation_level=1, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=self.sc.topic, partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                           partition_max_bytes=MB)])])
        with socket.create_connection((n.host, n.broker_port), timeout=60) as sock:
            resp: Any = _exchange(sock, ApiKey.FETCH, 12, req, 1)
        part = resp.responses[0].partitions[0]
        return int(part.error_code), bytes(part.records or b"")

    # -- reading ------------------------------------------------------------------------------------
    def check(self, got: Iterator[tuple[int, bytes | None, bytes | None]]) -> int:
        """Compare what a consumer returned with what was acknowledged; the records seen."""
        expected = iter(sorted(self.acked.items()))
        count = 0
        for offset, key, value in got:
            want_offset, index = next(expected, (None, None))
            assert offset == want_offset, f"record {count}: offset {offset}, expected {want_offset}"
            assert index is not None, f"offset {offset}: past the acknowledged records"
            assert key == index.to_bytes(8, "big"), f"offset {offset}: wrong key"
            assert value == value_of(index, self.sc.value_bytes), f"offset {offset}: value differs"
            count += 1
        assert count == len(self.acked), f"read {count} of {len(self.acked)} acknowledged records"
        return count

    def last_offset(self) -> int:
        return max(self.acked)

    def confluent_records(self, at_half: Callable[[], None]) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """confluent-kafka read_committed from offset 0 to the last acknowledged record; calls
        `at_half` once half the records are read (the leader kill)."""
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "error"})
        errors: list[str] = []
        try:
            consumer.assign([CkTopicPartition(self.sc.topic, 0, 0)])
            last, seen, half_done = self.last_offset(), 0, False
            deadline, progress = time.monotonic() + self.sc.wait_s, -1
            while progress < last:
                assert time.monotonic() < deadline, f"confluent-kafka stuck at {progress}: {errors[-5:]}"
                for msg in consumer.consume(1000, 1.0):
                    if msg.error() is not None:
                        assert not msg.error().fatal(), msg.error()
                        errors.append(str(msg.error()))
                        continue
                    progress, seen = msg.offset(), seen + 1
                    deadline = time.monotonic() + self.sc.wait_s
                    yield msg.offset(), msg.key(), msg.value()
                if not half_done and seen >= len(self.acked) // 2:
                    half_done = True
                    at_half()
        finally:
            consumer.close()
            self.figures["confluent_errors_during_read"] = errors[:10]

    def kafka_python_records(self) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """kafka-python read_committed from offset 0; poll errors (kafka-python raises
        UnknownServerError, which it does not treat as retriable) are counted and polled past."""
        consumer = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap, group_id=None,
                                 isolation_level="read_committed", enable_auto_commit=False,
                                 auto_offset_reset="none", request_timeout_ms=60000)
        tp, errors = KpTopicPartition(self.sc.topic, 0), 0
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            last, progress = self.last_offset(), -1
            deadline = time.monotonic() + self.sc.wait_s
            while progress < last:
                assert time.monotonic() < deadline, f"kafka-python stuck at {progress}"
                try:
                    batches = consumer.poll(timeout_ms=1000, max_records=5000)
                except KafkaError:
                    errors += 1
                    time.sleep(0.5)
                    continue
                for record in batches.get(tp, []):
                    progress = record.offset
                    deadline = time.monotonic() + self.sc.wait_s
                    yield record.offset, record.key, record.value
        finally:
            consumer.close()
            self.figures["kafka_python_poll_errors"] = errors

    # -- outage probes ------------------------------------------------------------------------------
    def clients_during_outage(self) -> None:
        """What each client gets from offset 0 while the store is down (figures)."""
        consumer = Consumer({"bootstrap.servers": self.cluster.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                             "isolation.level": "read_committed", "auto.offset.reset": "error"})
        consumer.assign([CkTopicPartition(self.sc.topic, 0, 0)])
        records, errors = 0, []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                if msg.error() is None:
                    records += 1
                else:
                    assert not msg.error().fatal(), msg.error()
                    errors.append(msg.error().str())
        consumer.close()
        self.figures["outage_confluent"] = {"records": records, "errors": sorted(set(errors))}
        kp = KafkaConsumer(bootstrap_servers=self.cluster.bootstrap, group_id=None,
                           isolation_level="read_committed", auto_offset_reset="none")
        tp = KpTopicPartition(self.sc.topic, 0)
        kp.assign([tp])
        kp.seek(tp, 0)
        outcome = "no records"
        try:
            for _ in range(5):
                if kp.poll(timeout_ms=1000).get(tp):
                    outcome = "records"
                    break
        except KafkaError as e:
            outcome = f"poll raised {type(e).__name__}"
        finally:
            kp.close()
        self.figures["outage_kafka_python"] = outcome


class LagSampler(threading.Thread):
    """Samples the leader's RemoteCopyLagBytes from the store's return until it reads 0: how
    far behind the copier was and how long it took to catch up (figures)."""

    def __init__(self, r: Run, leader: int) -> None:
        super().__init__(daemon=True)
        self.r, self.leader, self.started = r, leader, time.monotonic()

    def run(self) -> None:
        peak = 0.0
        while time.monotonic() - self.started < self.r.sc.wait_s:
            try:
                lag = self.r.metric(self.leader, "kafka_server_brokertopicmetrics_remotecopylagbytes")
            except OSError:
                lag = None
            if lag is not None:
                peak = max(peak, lag)
                if lag == 0:
                    self.r.lag_after_outage = {"peak_bytes": peak,
                                               "zero_after_s": round(time.monotonic() - self.started, 1)}
                    return
            time.sleep(0.5)


def run(sc: Scenario, base_dir: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """The whole scenario (module docstring); the figures."""
    prefix = f"s-{uuid.uuid4().hex[:10]}"
    with S3Server(sc.s3_kind) as s3:
        cluster = ClusterProcesses(base_dir, 3, overrides=cluster_overrides(s3, prefix), http=True)
        try:
            cluster.start()
            r = Run(sc, cluster, s3, prefix)
            _steps(r, log)
            return r.figures
        finally:
            cluster.stop()


def _steps(r: Run, log: Callable[[str], None]) -> None:
    sc = r.sc
    futures = r.admin.create_topics([NewTopic(sc.topic, 1, 3, config={
        "remote.storage.enable": "true", "segment.bytes": str(sc.segment_bytes),
        "local.retention.bytes": str(sc.local_retention_bytes), "retention.bytes": "-1",
        "retention.ms": "-1"})], operation_timeout=30)
    futures[sc.topic].result(timeout=60)
    wait_until("the topic's partition in sync", r.in_sync, sc.wait_s)
    log(f"producing {sc.records} records of {sc.value_bytes} B")
    _produce_with_outage(r, log)
    r.figures["acked_records"], r.figures["failed_records"] = len(r.acked), r.failed
    assert r.failed == 0, f"{r.failed} records failed"
    _wait_copied(r, log)
    _read_with_leader_kill(r, log)
    _restart_all_and_read(r, log)
    _lower_retention(r, log)


def _produce_with_outage(r: Run, log: Callable[[str], None]) -> None:
    sc = r.sc
    producer = Producer({"bootstrap.servers": r.cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "batch.size": 256 * 1024, "message.timeout.ms": 300000})
    cut = [sc.records // 20, sc.records * 2 // 5]
    started = time.monotonic()
    r.produce(producer, 0, cut[0])
    r.abort_a_transaction()
    r.produce(producer, cut[0], cut[1])
    leader = r.leader()
    wait_until("offset 0 tiered (the leader's local log starts later)",
               lambda: r.local_log_start(leader) > max(r.aborted), sc.wait_s)
    log(f"store down for {sc.outage_s:.0f} s")
    down = time.monotonic()
    r.s3.stop(keep_data=True)
    resumed = r.produce(producer, cut[1], sc.records, until=down + sc.outage_s / 2)
    r.figures["produced_during_outage_mb"] = round((resumed - cut[1]) * sc.value_bytes / MB, 1)
    code = r.fetch_error_at_zero(leader)
    assert code == UNKNOWN_SERVER_ERROR, f"Fetch of remote data with the store down answered {code}"
    r.figures["outage_fetch_error_code"] = code
    r.clients_during_outage()
    r.figures["outage_peak_disk_bytes"] = max(r.disk_bytes().values())
    time.sleep(max(0.0, sc.outage_s - (time.monotonic() - down)))
    r.s3.start()
    r.figures["outage_actual_s"] = round(time.monotonic() - down, 1)
    log("store back")
    sampler = LagSampler(r, r.leader())
    sampler.start()
    r.produce(producer, resumed, sc.records)
    elapsed = time.monotonic() - started
    r.figures["produce_s"] = round(elapsed, 1)
    r.figures["produce_mb_per_s"] = round(sc.total_bytes / MB / elapsed, 2)


def _wait_copied(r: Run, log: Callable[[str], None]) -> None:
    sc = r.sc
    started = time.monotonic()
    leader = r.leader()
    wait_until("copy lag 0 on the leader", lambda: r.metric(leader, "kafka_server_brokertopicmetrics_remotecopylagbytes") == 0,
               sc.wait_s)
    r.figures["catch_up_s"] = round(time.monotonic() - started, 1)
    r.figures["copy_lag_after_outage"] = r.lag_after_outage
    wait_until("every node's data dir under the bound",
               lambda: all(b < sc.disk_bound for b in r.disk_bytes().values()), sc.wait_s)
    r.figures["disk_bytes_per_node"] = r.disk_bytes()
    r.figures["remote_log_size_bytes"] = r.metric(leader, "kafka_server_brokertopicmetrics_remotelogsizebytes")
    r.figures["remote_objects"] = len(r.remote_keys())
    r.figures["leader_local_log_start"] = r.local_log_start(leader)
    assert max(r.aborted) < r.local_log_start(leader), "the aborted transaction is not in the tiered range"
    log(f"copied; disk per node {r.figures['disk_bytes_per_node']}")


def _read_with_leader_kill(r: Run, log: Callable[[str], None]) -> None:
    killed: list[int] = []

    def kill_leader() -> None:
        leader = wait_until("a live leader", r.leader, r.sc.wait_s)
        log(f"SIGKILL leader node {leader} mid-read")
        r.cluster.kill(leader)
        killed.append(leader)

    started = time.monotonic()
    count = r.check(r.confluent_records(kill_leader))
    elapsed = time.monotonic() - started
    assert killed, "the read ended before the leader was killed"
    r.figures["confluent_read"] = {"records": count, "s": round(elapsed, 1),
                                   "mb_per_s": round(count * r.sc.value_bytes / MB / elapsed, 2),
                                   "killed_leader": killed[0],
                                   "new_leader": wait_until("a live leader", r.leader, r.sc.wait_s)}
    log(f"confluent-kafka read {count} records in {elapsed:.1f} s")


def _restart_all_and_read(r: Run, log: Callable[[str], None]) -> None:
    log("restarting every node")
    r.cluster.stop()
    for node in r.cluster.nodes:
        r.cluster.spawn(node)
    r.cluster.wait_ready(*r.cluster.nodes, timeout_s=r.sc.wait_s)
    r.cluster.wait_settled(timeout_s=r.sc.wait_s)
    wait_until("the partition in sync after the restart", r.in_sync, r.sc.wait_s)
    started = time.monotonic()
    count = r.check(r.kafka_python_records())
    elapsed = time.monotonic() - started
    r.figures["kafka_python_read_after_restart"] = {
        "records": count, "s": round(elapsed, 1), "mb_per_s": round(count * r.sc.value_bytes / MB / elapsed, 2)}
    log(f"kafka-python read {count} records in {elapsed:.1f} s after the restart")


def _lower_retention(r: Run, log: Callable[[str], None]) -> None:
    sc = r.sc
    before = r.remote_keys()
    retention = sc.total_bytes // 8
    resource = ConfigResource(ConfigResource.Type.TOPIC, sc.topic, incremental_configs=[
        ConfigEntry("retention.bytes", str(retention), incremental_operation=AlterConfigOpType.SET)])
    for future in r.admin.incremental_alter_configs([resource]).values():
        future.result(timeout=60)
    log(f"retention.bytes={retention}: waiting for remote deletes")

    def low() -> int:
        consumer = Consumer({"bootstrap.servers": r.cluster.bootstrap, "group.id": "w"})
        try:
            return int(consumer.get_watermark_offsets(CkTopicPartition(sc.topic, 0), timeout=20)[0])
        finally:
            consumer.close()

    wait_until("the log start offset past the retained bytes",
               lambda: low() >= r.last_offset() - 2 * retention // sc.value_bytes, sc.wait_s)
    start = low()
    wait_until("the expired segments' objects gone from the bucket", lambda: not [
        k for k in r.remote_keys() if k.endswith(".log") and _end_of(k, before) < start], sc.wait_s)
    after = r.remote_keys()
    assert len(after) < len(before), "no remote object deleted"
    orphans = _orphans(after)
    assert not orphans, f"objects of deleted segments left in the bucket: {orphans[:5]}"
    r.figures["retention"] = {"retention_bytes": retention, "log_start_offset": start,
                              "objects_before": len(before), "objects_after": len(after)}
    log(f"bucket: {len(before)} objects before, {len(after)} after; log start {start}")


def _end_of(key: str, keys: list[str]) -> int:
    """The last offset of the segment `key` names: the next segment's base offset - 1 (from the
    listing before retention; the newest segment counts as never expired)."""
    bases = sorted({int(Path(k).name.split("-")[0]) for k in keys if k.endswith(".log")})
    base = int(Path(key).name.split("-")[0])
    later = [b for b in bases if b > base]
    return later[0] - 1 if later else 1 << 62


def _orphans(keys: list[str]) -> list[str]:
    """Objects (indexes, snapshots, checkpoints) whose segment has no `.log` object left."""
    def segment(key: str) -> str:
        return Path(key).name.split(".")[0]

    with_log = {segment(k) for k in keys if k.endswith(".log")}
    return [k for k in keys if segment(k) not in with_log]


def dump(figures: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, default=str) + "\n")
