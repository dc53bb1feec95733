"""Committed offsets live in `__consumer_offsets` and survive a broker restart (clean or
SIGKILL); and the `kafkapy groups` CLI shows members, committed offsets, end offsets and lag,
resets offsets and deletes groups.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.timeout(120)


def setup_topic(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[
        topic
    ].result(timeout=15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = consumer(bootstrap, group)
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        return [tp.offset for tp in got]
    finally:
        c.close()


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_committed_offsets_survive_restart(
    broker_factory: BrokerFactory, tmp_path: Path, how: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    first = broker_factory.start(data_dir=data)
    topic = "durable"
    setup_topic(first.bootstrap, topic, 3, 10)
    c = consumer(first.bootstrap, "keeper")
    try:
        c.commit(offsets=[TopicPartition(topic, p, 4 + p) for p in range(3)], asynchronous=False)
    finally:
        c.close()
    assert committed(first.bootstrap, "keeper", topic, 3) == [4, 5, 6]
    if how == "sigterm":
        assert first.stop() is not None
    else:
        first.kill()
    second = broker_factory.start(data_dir=data)
    assert committed(second.bootstrap, "keeper", topic, 3) == [4, 5, 6]
    # and a member of the group resumes there
    c = consumer(second.bootstrap, "keeper")
    try:
        c.subscribe([topic])
        seen: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 3:
            assert time.monotonic() < deadline, f"first offsets seen: {seen}"
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None
                assert offset is not None
                seen.setdefault(partition, offset)
        assert seen == {0: 4, 1: 5, 2: 6}
    finally:
        c.close()


def cli(bootstrap: str, *args: str) -> tuple[int, str]:
    result = subprocess.run(
        [sys.executable, "-m", "kafkapy", "groups", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, result.stdout + result.stderr


def test_groups_cli(broker: BrokerProcess, topic_name: str) -> None:
    setup_topic(broker.bootstrap, topic_name, 2, 10)
    group = f"cli-{topic_name}"
    c = consumer(broker.bootstrap, group)
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + 30
        read = 0
        while read < 7:
            assert time.monotonic() < deadline
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None and msg.partition() == 0:
                read += 1
                c.commit(message=msg, asynchronous=False)
        code, out = cli(broker.bootstrap, "list")
        assert code == 0
        assert any(line.split()[:2] == [group, "Stable"] for line in out.splitlines())
        code, out = cli(broker.bootstrap, "describe", "--group", group)
        assert code == 0, out
        rows = {
            tuple(line.split()[:2]): line.split()
            for line in out.splitlines()
            if line.startswith(topic_name)
        }
        # TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID ...
        assert rows[(topic_name, "0")][2:5] == ["7", "10", "3"]
        assert rows[(topic_name, "1")][2:5] == ["-", "10", "-"]
        assert rows[(topic_name, "0")][5] == c.memberid()
        code, out = cli(
            broker.bootstrap,
            "reset-offsets",
            "--group",
            group,
            "--topic",
            topic_name,
            "--to-earliest",
            "--execute",
        )
        assert code == 1  # the group is active: refused before any plan is printed
        assert f"group {group} is inactive, but its current state is Stable" in out
        assert "NEW-OFFSET" not in out
    finally:
        c.close()
    code, out = cli(
        broker.bootstrap,
        "reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic_name}:0",
        "--to-offset",
        "2",
    )
    assert code == 0
    assert "dry run" in out
    assert committed(broker.bootstrap, group, topic_name, 1) == [7]
    code, out = cli(
        broker.bootstrap,
        "reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic_name}:0",
        "--to-offset",
        "2",
        "--execute",
    )
    assert code == 0, out
    assert committed(broker.bootstrap, group, topic_name, 1) == [2]
    code, out = cli(broker.bootstrap, "delete", "--group", group)
    assert code == 0, out
    code, out = cli(broker.bootstrap, "delete", "--group", group)
    assert code == 1
    assert "GROUP_ID_NOT_FOUND" in out
