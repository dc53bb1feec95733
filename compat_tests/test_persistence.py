"""Durability across broker restarts, checked with a real client (confluent-kafka).

What users rely on: an acknowledged (acks=all) message survives a crash of the broker process.
SIGKILL gives the broker no chance to flush or write its clean-shutdown marker, so the restart
must recover the log from whatever reached the files. A clean SIGTERM restart must also keep
topics, partition counts and topic configs, and SIGTERM must finish promptly even with idle
client connections open.

Each test starts its own broker (function-scoped `broker_factory`) because it kills it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic

pytestmark = pytest.mark.timeout(120)

N_PARTITIONS = 2


def create_topic(bootstrap: str, name: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=N_PARTITIONS, replication_factor=1, config=config or {})]
    )
    futures[name].result(timeout=15)


def new_producer(bootstrap: str) -> Producer:
    # retries=0 and no idempotence: a message is either acked once or failed, never resent,
    # so any duplicate after the restart is the broker's doing.
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "retries": 0,
            "enable.idempotence": False,
            "message.timeout.ms": 5000,
        }
    )


def consume_all(
    bootstrap: str, topic: str, timeout_s: float = 30.0
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every message, reading each partition to EOF."""
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_topic("persist-reader"),
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(N_PARTITIONS)])
    out: list[tuple[int, int, bytes]] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(eof) < N_PARTITIONS:
            assert time.monotonic() < deadline, (
                f"no EOF on all partitions in {timeout_s}s ({len(out)} read)"
            )
            msg = cons.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            partition, offset, value = msg.partition(), msg.offset(), msg.value()
            assert partition is not None
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, f"consumer error: {err}"
                eof.add(partition)
                continue
            assert offset is not None
            assert value is not None
            eof.discard(partition)
            out.append((partition, offset, value))
    finally:
        cons.close()
    return out


def test_sigkill_keeps_every_acked_message(broker_factory: BrokerFactory) -> None:
    broker = broker_factory.start()
    topic = unique_topic("persist-kill")
    create_topic(broker.bootstrap, topic)
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[bytes] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        value = msg.value()
        assert value is not None
        if err is None:
            partition, offset = msg.partition(), msg.offset()
            assert partition is not None
            assert offset is not None
            acked[value] = (partition, offset)
        else:
            failed.append(value)

    prod = new_producer(broker.bootstrap)
    # Phase 1: 600 messages, all acknowledged before the crash.
    for i in range(600):
        prod.produce(
            topic, key=f"k{i % 13}".encode(), value=f"m{i:05d}".encode(), on_delivery=on_delivery
        )
    assert prod.flush(30) == 0
    assert len(acked) == 600, (
        f"only {len(acked)} of 600 acked before the crash; failures {failed[:3]}"
    )

    # Phase 2: keep producing and SIGKILL the broker in the middle of it.
    stop = threading.Event()

    def killer() -> None:
        deadline = time.monotonic() + 10
        while len(acked) < 700 and time.monotonic() < deadline:
            time.sleep(0.005)
        broker.kill()
        stop.set()

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    i = 600
    while not stop.is_set() and i < 5600:
        try:
            prod.produce(
                topic,
                key=f"k{i % 13}".encode(),
                value=f"m{i:05d}".encode(),
                on_delivery=on_delivery,
            )
            i += 1
        except BufferError:
            pass
        prod.poll(0.001)
    thread.join(timeout=15)
    prod.flush(10)  # in-flight messages now fail (broker gone); acks received stay valid
    acked_before_restart = dict(acked)
    assert len(acked_before_restart) >= 700, "broker was killed before phase 2 got any acks"

    broker.start()  # same data dir, new port
    records = consume_all(broker.bootstrap, topic)

    seen: dict[bytes, tuple[int, int]] = {}
    for partition, offset, value in records:
        assert value not in seen, (
            f"{value!r} present twice: {seen[value]} and {(partition, offset)}"
        )
        seen[value] = (partition, offset)
    lost = [v for v in acked_before_restart if v not in seen]
    assert not lost, f"{len(lost)} acknowledged messages lost after SIGKILL, e.g. {lost[:5]}"
    moved = {v: (where, seen[v]) for v, where in acked_before_restart.items() if seen[v] != where}
    assert not moved, (
        f"acknowledged messages changed offset after restart: {list(moved.items())[:5]}"
    )
    per_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for partition, offset, value in records:
        per_partition[partition].append((offset, value))
    for partition, entries in per_partition.items():
        assert [o for o, _ in entries] == list(range(len(entries))), (
            f"partition {partition}: offset gap"
        )
        seqs = [int(v[1:]) for _, v in entries]
        assert seqs == sorted(seqs), f"partition {partition}: order changed by recovery"

    # The recovered log accepts new appends right after the last recovered offset.
    prod = new_producer(broker.bootstrap)
    prod.produce(topic, key=b"after", value=b"after-restart", partition=0)
    assert prod.flush(15) == 0
    after = [r for r in consume_all(broker.bootstrap, topic) if r[0] == 0]
    assert after[-1] == (0, len(per_partition[0]), b"after-restart")


def _topic_config(bootstrap: str, topic: str) -> dict[str, str | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    entries = next(iter(futures.values())).result(timeout=15)
    return {name: entry.value for name, entry in entries.items()}


def test_sigterm_restart_keeps_topics_and_configs(broker_factory: BrokerFactory) -> None:
    broker = broker_factory.start()
    topic = unique_topic("persist-term")
    create_topic(
        broker.bootstrap, topic, config={"retention.ms": "123456789", "cleanup.policy": "delete"}
    )
    prod = new_producer(broker.bootstrap)
    for i in range(20):
        prod.produce(topic, key=f"k{i}".encode(), value=f"m{i:05d}".encode())
    assert prod.flush(15) == 0
    before = consume_all(broker.bootstrap, topic)
    assert len(before) == 20

    took = broker.stop()
    assert took is not None, "broker ignored SIGTERM (needed SIGKILL)"
    assert broker.proc is not None
    # 0, or 143 as Kafka itself reports SIGTERM; -15 would mean killed by the signal, no shutdown.
    assert broker.proc.returncode in (0, 143), f"unclean exit code {broker.proc.returncode}"
    broker.start()

    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=15)
    assert topic in md.topics, "topic lost across a clean restart"
    assert sorted(md.topics[topic].partitions) == list(range(N_PARTITIONS))
    assert _topic_config(broker.bootstrap, topic)["retention.ms"] == "123456789"
    # Same (partition, offset, value) set; the interleaving of partitions is up to the client.
    assert sorted(consume_all(broker.bootstrap, topic)) == sorted(before)


def test_sigterm_is_prompt_with_idle_connections(broker_factory: BrokerFactory) -> None:
    broker: BrokerProcess = broker_factory.start(memory=True)
    topic = unique_topic("persist-idle")
    create_topic(broker.bootstrap, topic)
    idle_sockets = [
        socket.create_connection((broker.host, broker.port), timeout=5) for _ in range(3)
    ]
    # A consumer parked in a long-poll fetch on an empty topic.
    cons = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic("idle"),
            "fetch.wait.max.ms": 5000,
        }
    )
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        for _ in range(5):
            cons.poll(0.1)
        took = broker.stop(timeout_s=5.0)
        assert took is not None, "broker ignored SIGTERM for 5s with idle connections open"
        assert took < 3.0, f"SIGTERM took {took:.2f}s with idle connections (should be ~2s at most)"
    finally:
        for sock in idle_sockets:
            sock.close()
        cons.close()


def test_retention_applies_live(broker_factory: BrokerFactory) -> None:
    """Lowering retention.ms on a live topic deletes its old closed segments: consumers see the
    log start offset move, and what is left still reads from there in order."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
    )

    broker = broker_factory.start(extra_args=["--override", "log.retention.check.interval.ms=200"])
    topic = unique_topic("retention")
    create_topic(broker.bootstrap, topic, config={"segment.bytes": "4096"})
    prod = new_producer(broker.bootstrap)
    old_ts = int(time.time() * 1000) - 3_600_000
    for i in range(60):  # one batch each, ~600 bytes: many 4 KiB segments on partition 0
        prod.produce(topic, value=f"m{i:05d}".encode() * 60, partition=0, timestamp=old_ts)
        assert prod.flush(10) == 0
    tp = TopicPartition(topic, 0)
    cons = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique_topic("ret")})
    try:
        assert cons.get_watermark_offsets(tp, timeout=10) == (0, 60)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        next(iter(admin.incremental_alter_configs([resource]).values())).result(timeout=15)
        deadline = time.monotonic() + 15
        low, high = 0, 60
        while low == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            low, high = cons.get_watermark_offsets(tp, timeout=10)
        assert low > 0, "retention.ms=60000 deleted nothing from an hour-old log within 15 s"
        assert high == 60, "retention must never touch the active segment's end"
    finally:
        cons.close()
    remaining = [r for r in consume_all(broker.bootstrap, topic) if r[0] == 0]
    assert [offset for _, offset, _ in remaining] == list(range(low, 60))


def test_compaction_keeps_latest_value_per_key(broker_factory: BrokerFactory) -> None:
    """cleanup.policy=compact: old values of a key go away, the latest value of every key stays,
    and surviving records keep their offsets (what changelog/state-store consumers rely on)."""
    broker = broker_factory.start(extra_args=["--override", "log.retention.check.interval.ms=200"])
    topic = unique_topic("compact")
    create_topic(
        broker.bootstrap,
        topic,
        config={
            "cleanup.policy": "compact",
            "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    prod = new_producer(broker.bootstrap)
    latest: dict[bytes, tuple[int, bytes]] = {}
    for i in range(80):
        key = f"key-{i % 5}".encode()
        value = f"{key.decode()}-version-{i:03d}-".encode() * 20
        prod.produce(topic, key=key, value=value, partition=0)
        assert prod.flush(10) == 0
        latest[key] = (i, value)
    deadline = time.monotonic() + 20
    records = consume_all(broker.bootstrap, topic)
    while len(records) == 80 and time.monotonic() < deadline:
        time.sleep(0.3)
        records = consume_all(broker.bootstrap, topic)
    assert len(records) < 80, "nothing compacted within 20 s"
    offsets = [offset for _, offset, _ in records]
    assert offsets == sorted(offsets), "compaction reordered records"
    by_offset = {offset: value for _, offset, value in records}
    for key, (offset, value) in latest.items():
        assert by_offset.get(offset) == value, f"latest value of {key!r} (offset {offset}) lost"
