"""Tiered storage's write side (KIP-405) as a user runs it: `kafkapy serve` with
`remote.log.storage.system.enable=true` against a real SeaweedFS (`weed server -s3`), records
produced by confluent-kafka into a topic with small segments and a small `local.retention.bytes`.

What users rely on: the rolled segments land in the bucket with their indexes, the partition's
directory shrinks to the local bound, `__remote_log_metadata` holds Kafka's records of each copy,
and an object store outage is a degraded mode - produce goes on, nothing is deleted locally
that is not copied, the copy-lag metric says so, and the copier catches up when the store is back.
"""

from __future__ import annotations

import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkapy.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    decode_remote_log_metadata,
)
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.cluster import free_ports
from kafkapy.testing.object_store import S3Server

from .conftest import BrokerFactory, BrokerProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
TIMEOUT_S = 30
WAIT_S = 90
SEGMENT_BYTES = 16 * 1024
LOCAL_RETENTION_BYTES = 48 * 1024
METADATA_PARTITIONS = 3
RECORD = b"x" * 1000


def _wait(what: str, check: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server("seaweedfs") as server:
        yield server


@pytest.fixture
def tiered(broker_factory: BrokerFactory, s3: S3Server) -> tuple[BrokerProcess, int, str]:
    """A broker with tiering on, its HTTP port, and the key prefix of its objects."""
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    http_port = free_ports(1)[0]
    settings = {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.s3.bucket.name": s3.bucket,
        "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        "rsm.config.key.prefix": prefix,
        "rsm.config.storage.s3.api.max.attempts": "1",
        "rsm.config.storage.s3.api.connect.timeout.ms": "1000",
        "rsm.config.storage.s3.api.call.timeout.ms": "5000",
        "remote.log.manager.task.interval.ms": "300",
        "remote.log.manager.copier.retry.backoff.max.ms": "1000",
        "remote.log.metadata.topic.num.partitions": str(METADATA_PARTITIONS),
        "log.retention.check.interval.ms": "300",
        "kafkapy.http.listener": f"127.0.0.1:{http_port}",
    }
    args = [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    return broker_factory.start(extra_args=args), http_port, prefix


def _create_topic(broker: BrokerProcess, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
               "local.retention.bytes": str(LOCAL_RETENTION_BYTES)}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=TIMEOUT_S)


def _produce(broker: BrokerProcess, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "linger.ms": 0, "batch.size": 2000})
    failures: list[object] = []
    for i in range(count):
        producer.produce(topic, RECORD, key=str(i).encode(),
                         on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert not failures, failures


def _local_log_bytes(broker: BrokerProcess, topic: str) -> int:
    assert broker.data_dir is not None
    return sum(p.stat().st_size for p in (broker.data_dir / f"{topic}-0").glob("*.log"))


def _remote_logs(store: S3ObjectStore, topic: str) -> list[str]:
    return [o.key for o in store.list(f"{topic}-") if o.key.endswith(".log")]


def _metric(http_port: int, name: str, topic: str) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10).read()
    for line in body.decode().splitlines():
        if line.startswith(f'{name}{{topic="{topic}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _metadata_records(broker: BrokerProcess) -> list[object]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("__remote_log_metadata", p, 0)
                         for p in range(METADATA_PARTITIONS)])
        records: list[object] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                records.append(decode_remote_log_metadata(msg.value()))
        return records
    finally:
        consumer.close()


def test_rolled_segments_go_to_the_bucket_and_local_disk_keeps_the_bound(
        tiered: tuple[BrokerProcess, int, str], s3: S3Server, topic_name: str) -> None:
    broker, http_port, prefix = tiered
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    _create_topic(broker, topic_name)
    _produce(broker, topic_name, 400)  # ~400 KB: about 25 segments
    bound = LOCAL_RETENTION_BYTES + 2 * SEGMENT_BYTES
    _wait("local log under the local retention bound",
          lambda: _local_log_bytes(broker, topic_name) <= bound)
    copied = _remote_logs(store, topic_name)
    assert len(copied) >= 15
    suffixes = {Path(o.key).suffix for o in store.list(f"{topic_name}-")}
    assert {".log", ".index", ".timeindex", ".leader_epoch_checkpoint"} <= suffixes
    records = _metadata_records(broker)
    started = [r for r in records if isinstance(r, RemoteLogSegmentMetadata)]
    finished = [r for r in records if isinstance(r, RemoteLogSegmentMetadataUpdate)
                and r.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
    assert len(started) >= len(copied)
    assert len(finished) >= len(copied)
    assert all(r.segment_id.partition.topic == topic_name for r in started)
    assert _metric(http_port, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic_name) > 0


def test_object_store_outage_keeps_producing_and_the_copier_catches_up(
        tiered: tuple[BrokerProcess, int, str], s3: S3Server, topic_name: str) -> None:
    broker, http_port, prefix = tiered
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    _create_topic(broker, topic_name)
    _produce(broker, topic_name, 100)
    _wait("first copies", lambda: len(_remote_logs(store, topic_name)) >= 3)
    s3.stop(keep_data=True)
    try:
        _produce(broker, topic_name, 300)  # acknowledged while the store is down
        lag_metric = "kafka_server_brokertopicmetrics_remotecopylagbytes"
        _wait("copy lag reported", lambda: _metric(http_port, lag_metric, topic_name) > 0)
        # nothing uncopied is deleted: the local log holds everything produced since the outage
        assert _local_log_bytes(broker, topic_name) > 300 * len(RECORD)
    finally:
        s3.start()
    _wait("copier catching up",
          lambda: _local_log_bytes(broker, topic_name) <= LOCAL_RETENTION_BYTES + 2 * SEGMENT_BYTES)
    _wait("lag back to zero", lambda: _metric(http_port, lag_metric, topic_name) == 0)
    assert len(_remote_logs(store, topic_name)) >= 20


def test_retention_and_delete_topics_remove_remote_objects(
        tiered: tuple[BrokerProcess, int, str], s3: S3Server, topic_name: str) -> None:
    broker, _, prefix = tiered
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    total = 10 * SEGMENT_BYTES
    configs = {"remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
               "local.retention.bytes": str(LOCAL_RETENTION_BYTES), "retention.bytes": str(total)}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)])[topic_name].result(
        timeout=TIMEOUT_S)
    _produce(broker, topic_name, 400)

    def remote_bytes() -> int:
        return sum(o.size for o in store.list(f"{topic_name}-") if o.key.endswith(".log"))

    _wait("remote retention by retention.bytes",
          lambda: 0 < remote_bytes() <= total and _local_log_bytes(broker, topic_name)
          <= LOCAL_RETENTION_BYTES + 2 * SEGMENT_BYTES)
    admin.delete_topics([topic_name])[topic_name].result(timeout=TIMEOUT_S)
    _wait("the deleted topic's objects gone", lambda: store.list(f"{topic_name}-") == [])


def test_a_restarted_broker_resumes_after_what_the_bucket_holds(
        tiered: tuple[BrokerProcess, int, str], s3: S3Server, topic_name: str) -> None:
    broker, _, prefix = tiered
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    _create_topic(broker, topic_name)
    _produce(broker, topic_name, 150)
    _wait("first copies", lambda: len(_remote_logs(store, topic_name)) >= 6)
    assert broker.stop() is not None
    before = len(_remote_logs(store, topic_name))
    broker.start()
    _produce(broker, topic_name, 150)  # about 9 more segments
    _wait("copies after the restart", lambda: len(_remote_logs(store, topic_name)) >= before + 5)
    starts = [Path(k).name.split("-")[0] for k in _remote_logs(store, topic_name)]
    assert len(starts) == len(set(starts)), "a segment was copied twice"
