"""Storage faults stay with their partition, checked with a real client (confluent-kafka).

What users rely on: any name Kafka accepts (up to 249 characters) can be created, written,
deleted and created again, and the broker restarts with every topic served. Deleting renames
the partition directory to a `-delete` name; with a long topic that name must still fit the
file system's 255-byte limit, or the old data stays behind, the re-created topic stays offline
and, at the next start, no topic is served at all. Likewise one partition directory that
cannot be opened at start-up must not keep the broker down or the other topics unserved.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ClientPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    NewTopic,
)

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic
from kafkapy.chaos.faults import DiskFill

pytestmark = pytest.mark.timeout(180)

LONGEST = 249  # Kafka's topic name limit


def _create(admin: AdminClient, name: str, partitions: int = 1) -> None:
    """Create `name`, retrying while a delete of the same name is still being applied."""
    deadline = time.monotonic() + 20
    while True:
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions,
                                          replication_factor=1)])[name].result(timeout=15)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _produce(bootstrap: str, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 10_000})
    failures: list[KafkaError] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(15) == 0, f"undelivered to {topic[:40]}..."
    assert failures == [], f"{topic[:40]}...: {failures}"


def _read(bootstrap: str, topic: str, timeout_s: float = 20.0, partition: int = 0) -> list[bytes]:
    """Every value of `partition`, read to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("names"),
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([ClientPartition(topic, partition, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            assert time.monotonic() < deadline, f"{topic[:40]}...: no end of partition ({values})"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, f"{topic[:40]}...: {err}"
                return values
            value = msg.value()
            assert value is not None
            values.append(value)
    finally:
        consumer.close()


def _restart(broker: BrokerProcess) -> None:
    assert broker.stop() is not None, "broker ignored SIGTERM"
    broker.start()


def test_longest_topic_name_deleted_recreated_and_served_after_restart(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    others = [unique_topic(f"bystander{i}") for i in range(3)]
    for name in others:
        _create(admin, name)
        _produce(broker.bootstrap, name, [name.encode()])
    long_name = unique_topic("long").ljust(LONGEST, "x")
    assert len(long_name) == LONGEST

    _create(admin, long_name)
    _produce(broker.bootstrap, long_name, [b"first life"])
    admin.delete_topics([long_name])[long_name].result(timeout=15)
    _create(admin, long_name)
    _produce(broker.bootstrap, long_name, [b"second life"])
    assert _read(broker.bootstrap, long_name) == [b"second life"]

    _restart(broker)
    for name in others:
        assert _read(broker.bootstrap, name) == [name.encode()]
    assert _read(broker.bootstrap, long_name) == [b"second life"]
    _produce(broker.bootstrap, long_name, [b"after restart"])
    assert _read(broker.bootstrap, long_name) == [b"second life", b"after restart"]
    assert not any("File name too long" in line
                   for line in broker.log_text().splitlines()), broker.log_tail()


def test_a_partition_that_cannot_be_opened_leaves_the_others_served(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    damaged, healthy = unique_topic("damaged"), unique_topic("healthy")
    for name in (damaged, healthy):
        _create(admin, name)
        _produce(broker.bootstrap, name, [name.encode()])
    assert broker.stop() is not None, "broker ignored SIGTERM"
    assert broker.data_dir is not None
    segment = Path(broker.data_dir) / f"{damaged}-0" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()  # unreadable: opening the log fails with "Is a directory"

    broker.start()
    assert _read(broker.bootstrap, healthy) == [healthy.encode()]
    _produce(broker.bootstrap, healthy, [b"after restart"])
    errors = [line for line in broker.log_text().splitlines()
              if " ERROR " in line and f"{damaged}-0" in line]
    assert errors, broker.log_tail()
    assert any("Is a directory" in line for line in errors), errors
    ready = [line for line in broker.log_text().splitlines() if line.startswith("kafkapy ready")]
    assert ", 1 partitions offline" in ready[-1], ready  # served without it, and says so


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[tuple[DiskFill, Path]]:
    """A 16 MiB tmpfs at `tmp_path/small` (root only: a real mount, as `kafkapy chaos` makes)."""
    disk = DiskFill(size_mib=16)
    why = disk.unavailable()
    if why is not None:
        pytest.skip(why)
    directory = tmp_path / "small"
    disk.mount(directory)
    try:
        yield disk, directory
    finally:
        disk.close()


def test_create_topics_on_a_full_disk_answers_success_with_the_failed_replicas_offline(
    broker_factory: BrokerFactory, tmp_path: Path, small_disk: tuple[DiskFill, Path]
) -> None:
    disk, small = small_disk
    roomy = tmp_path / "roomy"
    broker = broker_factory.start(dir_from_config=True, extra_args=[
        "--override", f"log.dirs={roomy},{small}"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    before, name = unique_topic("before"), unique_topic("full")
    _create(admin, before, partitions=2)  # placed one per log dir
    (served,) = [p for p in range(2) if (roomy / f"{before}-{p}").is_dir()]
    disk.fill(small)
    try:
        # the controller commits the topic whatever the disk says: an error answer would send
        # the client into a retry that meets TOPIC_ALREADY_EXISTS
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(timeout=30)
        with pytest.raises(KafkaException) as again:
            admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])[name].result(timeout=30)
        assert again.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
        producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3_000})
        failures: list[KafkaError] = []
        producer.produce(name, value=b"v", on_delivery=lambda err, _msg: failures.append(err) if err else None)
        producer.flush(10)
        assert failures, "a replica on the full disk took a write"
        _produce(broker.bootstrap, before, [b"still served"], partition=served)
        assert _read(broker.bootstrap, before, partition=served) == [b"still served"]
    finally:
        disk.free(small)
    offline = [line for line in broker.log_text().splitlines() if f"{name}-" in line and "is offline" in line]
    assert len(offline) == 2, broker.log_tail()
    assert all("No space left on device" in line for line in offline), offline
