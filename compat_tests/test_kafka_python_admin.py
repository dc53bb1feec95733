"""kafka-python's admin client on the cluster-level APIs its own suite exercises:
AlterReplicaLogDirs (a replica moved between two `log.dirs`) and DescribeQuorum on one node."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from kafka.errors import LogDirNotFoundError, NoError  # type: ignore[import-untyped]

from .conftest import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.timeout(120)


def _values(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    got = []
    for msg in consumer:
        got.append(msg.value)
        if len(got) == n:
            break
    consumer.close()
    return got


def test_replica_moves_between_log_dirs_and_keeps_its_data(
    broker_factory: BrokerFactory, tmp_path: Path, topic_name: str
) -> None:
    first, second = tmp_path / "dir-a", tmp_path / "dir-b"
    broker = broker_factory.start(dir_from_config=True, extra_args=[
        "--override", f"log.dirs={first},{second}"])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(10):
            producer.send(topic_name, b"before-%d" % i, partition=0)
        producer.flush()
        [where] = [d["log_dir"] for d in admin.describe_log_dirs()[0]["log_dirs"]
                   if any(t["name"] == topic_name for t in d["topics"])]
        target = str(second.resolve()) if Path(where) == first.resolve() else str(first.resolve())
        moved = admin.alter_replica_log_dirs({(topic_name, 0, 1): target})
        assert list(moved.values()) == [NoError]
        dirs = {d["log_dir"]: {t["name"] for t in d["topics"]} for d in admin.describe_log_dirs()[0]["log_dirs"]}
        assert topic_name in dirs[target]
        assert topic_name not in dirs[where]
        assert (Path(target) / f"{topic_name}-0").is_dir()
        assert not (Path(where) / f"{topic_name}-0").exists()
        for i in range(5):
            producer.send(topic_name, b"after-%d" % i, partition=0)
        producer.flush()
        producer.close()
        expected = [b"before-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(5)]
        assert _values(broker.bootstrap, topic_name, 15) == expected
        wrong = admin.alter_replica_log_dirs({(topic_name, 0, 1): str(tmp_path / "nowhere")})
        assert list(wrong.values()) == [LogDirNotFoundError]
    finally:
        admin.close()


def test_describe_metadata_quorum_on_a_single_node(broker: BrokerProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    [topic] = quorum["topics"]
    [partition] = topic["partitions"]
    assert (topic["topic_name"], partition["partition_index"], partition["error"]) == ("__cluster_metadata", 0, None)
    node_id = partition["leader_id"]
    assert [v["replica_id"] for v in partition["current_voters"]] == [node_id]
    assert partition["observers"] == []
