"""Metadata snapshots (KIP-630) in a real cluster: kafkapy subprocesses (kafkapy.testing.cluster)
with a tiny snapshot interval and small segments, checked through confluent-kafka.

What users rely on: the metadata log does not grow forever - every node writes snapshots
(`<offset>-<epoch>.checkpoint`) and the metadata log's old segments go - and still a restarted
voter and a broker-only node that lost its whole data directory come back with every topic (the
empty one by fetching the leader's snapshot, since the log it would replay is gone).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (
    ADMIN_TIMEOUT_S,
    create_topic,
    start_cluster,
    wait_until,
)
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(240)

SNAPSHOT_OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "1500",
    "log.segment.bytes": "1024",
}


def _metadata_dir(cluster: ClusterProcesses, node_id: int) -> Path:
    (found,) = cluster.nodes[node_id].data_dir.rglob("__cluster_metadata-0")
    return found


def _snapshots(cluster: ClusterProcesses, node_id: int) -> list[str]:
    try:
        return sorted(p.name for p in _metadata_dir(cluster, node_id).glob("*.checkpoint"))
    except ValueError:  # no metadata dir yet
        return []


def _segments(cluster: ClusterProcesses, node_id: int) -> list[int]:
    return sorted(int(p.stem) for p in _metadata_dir(cluster, node_id).glob("*.log"))


def _created(admin: AdminClient, topic: str) -> bool:
    """Create `topic` (RF 2); True once it exists - also when an earlier try that timed out
    during a controller failover went through after all."""
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=2)], operation_timeout=ADMIN_TIMEOUT_S
    )
    try:
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return True


def _topics_seen_by(cluster: ClusterProcesses, node_id: int, wanted: set[str]) -> bool:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(node_id)})
    md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    return wanted <= {name for name, t in md.topics.items() if t.error is None}


def test_snapshots_truncate_the_metadata_log_and_nodes_catch_up(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, 4, voters=3, overrides=SNAPSHOT_OVERRIDES)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = {unique_topic(f"snap{i}") for i in range(30)}
        for topic in sorted(topics):
            create_topic(admin, topic, 1, 2)
        for node_id in cluster.nodes:
            wait_until(
                f"a metadata snapshot on node {node_id}",
                lambda n=node_id: _snapshots(cluster, n),
                cluster,
            )
            wait_until(
                f"node {node_id}'s first metadata segment deleted",
                lambda n=node_id: _segments(cluster, n)[0] > 0,
                cluster,
            )
            assert len(_snapshots(cluster, node_id)) <= 2  # older snapshots are deleted

        # a voter restarts from its snapshot plus its log tail, missing what it slept through
        # (a standby one: this test is about catching up, not controller failover)
        controller = admin.describe_cluster().result(timeout=ADMIN_TIMEOUT_S).controller.id
        victim = next(v for v in (1, 2, 3) if v != controller)
        cluster.kill(victim)
        later = {unique_topic(f"late{i}") for i in range(15)}
        for topic in sorted(later):  # the first ones may wait for a new controller
            wait_until(f"topic {topic} created", lambda t=topic: _created(admin, t), cluster)
        cluster.restart(victim)
        wait_until(
            "the restarted voter to list every topic",
            lambda: _topics_seen_by(cluster, victim, topics | later),
            cluster,
        )

        # a broker-only node with an empty data directory rebuilds from the leader's snapshot
        cluster.kill(4)
        shutil.rmtree(cluster.nodes[4].data_dir)
        cluster.restart(4)
        wait_until(
            "the wiped broker to list every topic",
            lambda: _topics_seen_by(cluster, 4, topics | later),
            cluster,
        )
        assert _segments(cluster, 4)[0] > 0  # it never had the start of the log
        assert _snapshots(cluster, 4)
    except Exception as exc:
        pytest.fail(f"{exc!r}\n{cluster.logs()}")
    finally:
        cluster.stop()
