"""Tiered storage's write side on a three-node cluster (subprocesses) with a real SeaweedFS.

What users rely on: every partition's leader copies its rolled segments, whichever broker leads
the `__remote_log_metadata` partition its records go to (a record for a metadata partition led
elsewhere is produced there); every replica's local directory shrinks to the local bound once
copied; and after the leader is killed, the new leader resumes after the segments already in
the bucket instead of copying them again.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import create_topic, partitions, start_cluster, wait_until
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.cluster import ClusterProcesses
from kafkapy.testing.object_store import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
SEGMENT_BYTES = 16 * 1024
LOCAL_RETENTION_BYTES = 32 * 1024
PARTITIONS = 3


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server("seaweedfs") as server:
        yield server


@pytest.fixture
def cluster(tmp_path: Path, s3: S3Server) -> Iterator[ClusterProcesses]:
    overrides = {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.s3.bucket.name": s3.bucket,
        "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        "rsm.config.key.prefix": f"c-{uuid.uuid4().hex[:10]}",
        "remote.log.manager.task.interval.ms": "300",
        "remote.log.manager.copier.retry.backoff.max.ms": "1000",
        "remote.log.metadata.topic.num.partitions": "3",
        "log.retention.check.interval.ms": "300",
    }
    c = start_cluster(tmp_path, 3, overrides=overrides)
    try:
        yield c
    finally:
        c.stop()


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "batch.size": 2000,
                         "linger.ms": 0})
    for i in range(per_partition * PARTITIONS):
        producer.produce(topic, b"x" * 1000, partition=i % PARTITIONS)
        producer.poll(0)
    assert producer.flush(60) == 0


def _remote_starts(store: S3ObjectStore, topic: str, partition: int) -> list[int]:
    keys = [o.key for o in store.list(f"{topic}-") if o.key.endswith(".log")]
    return [int(Path(k).name.split("-")[0]) for k in keys if f"/{partition}/" in k]


def _settled_starts(store: S3ObjectStore, topic: str, partition: int) -> list[int]:
    """The partition's remote segments once the list stayed the same for three seconds."""
    last, since = _remote_starts(store, topic, partition), time.monotonic()
    while time.monotonic() - since < 3:
        time.sleep(0.3)
        now = _remote_starts(store, topic, partition)
        if now != last:
            last, since = now, time.monotonic()
    return last


def _local_bytes(cluster: ClusterProcesses, node: int, topic: str, partition: int) -> int:
    directory = cluster.nodes[node].data_dir / f"{topic}-{partition}"
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_leaders_copy_and_a_new_leader_resumes(cluster: ClusterProcesses, s3: S3Server) -> None:
    prefix = cluster.overrides["rsm.config.key.prefix"]
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("tiered")
    create_topic(admin, topic, PARTITIONS, 3, {
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": str(LOCAL_RETENTION_BYTES)})
    _produce(cluster.bootstrap, topic, 150)
    bound = LOCAL_RETENTION_BYTES + 2 * SEGMENT_BYTES
    wait_until("every partition copied and every replica under its local bound", lambda: all(
        len(_remote_starts(store, topic, p)) >= 5 and all(
            _local_bytes(cluster, n, topic, p) <= bound for n in cluster.nodes)
        for p in range(PARTITIONS)), cluster, timeout_s=120)
    leader = partitions(admin, topic)[0][0]
    before = _settled_starts(store, topic, 0)  # no copy in flight: the kill leaves no orphan
    cluster.kill(leader)
    survivor = next(n for n in cluster.nodes if n != leader)
    bootstrap = cluster.bootstrap_of(survivor)
    _produce(bootstrap, topic, 100)
    wait_until("the new leader copying the segments produced since", lambda: len(
        _remote_starts(store, topic, 0)) >= len(before) + 4, cluster, timeout_s=120)
    starts = _remote_starts(store, topic, 0)
    assert set(before) <= set(starts)
    duplicated = [s for s, n in Counter(starts).items() if n > 1]
    assert duplicated == [], f"segments copied twice: {duplicated}"
