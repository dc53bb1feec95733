"""Transactions with real clients: librdkafka (confluent-kafka), kafka-python and aiokafka.

What users rely on: a read_committed consumer sees exactly the committed transactions, in order,
and never an aborted or open one; a second producer with the same transactional id fences the
first; a transaction left open past its timeout is aborted; a broker restarted mid-transaction
recovers and the transaction is aborted by the producer's next incarnation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .conftest import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.timeout(120)

SMALL = [
    "--override", "transaction.state.log.num.partitions=2",
    "--override", "offsets.topic.num.partitions=2",
]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("txn"))
    try:
        yield factory.start(extra_args=SMALL)
    finally:
        factory.close()


def producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
        "transaction.timeout.ms": 10_000,
    }
    conf.update(extra)
    return Producer(conf)


def read_all(bootstrap: str, topic: str, isolation: str, *, timeout_s: float = 15.0,
             expect: int | None = None) -> list[bytes]:
    """Every value of partition 0 up to its end for `isolation` (bounded by `timeout_s`)."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{topic}-{isolation}-{time.time()}",
        "isolation.level": isolation, "auto.offset.reset": "earliest",
        "enable.partition.eof": True, "enable.auto.commit": False,
    })
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and (expect is None or len(out) >= expect):
                    break
                continue
            out.append(m.value() or b"")
        return out
    finally:
        c.close()


def test_committed_and_aborted_confluent(txn_broker: BrokerProcess, topic_name: str) -> None:
    p = producer(txn_broker.bootstrap, f"tid-{topic_name}")
    p.init_transactions(15)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic_name, value=b"c%d" % i, partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic_name, value=b"a%d" % i, partition=0)
    p.flush(15)  # on the broker before the abort (librdkafka purges unsent messages)
    p.abort_transaction(15)
    p.begin_transaction()
    for i in range(50, 100):
        p.produce(topic_name, value=b"c%d" % i, partition=0)
    p.commit_transaction(15)
    committed = [b"c%d" % i for i in range(100)]
    aborted = [b"a%d" % i for i in range(50)]
    assert read_all(txn_broker.bootstrap, topic_name, "read_committed") == committed
    assert read_all(txn_broker.bootstrap, topic_name, "read_uncommitted") == committed[:50] + aborted + committed[50:]
    # and the committed end offset is the LSO == high watermark once all is decided
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "wm", "isolation.level": "read_committed"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, 153)  # 150 records + 3 markers
    finally:
        c.close()


def test_open_transaction_hidden_from_read_committed(txn_broker: BrokerProcess, topic_name: str) -> None:
    p = producer(txn_broker.bootstrap, f"tid-{topic_name}")
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic_name, value=b"first", partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    p.produce(topic_name, value=b"pending", partition=0)
    p.flush(15)
    assert read_all(txn_broker.bootstrap, topic_name, "read_committed", timeout_s=3) == [b"first"]
    assert read_all(txn_broker.bootstrap, topic_name, "read_uncommitted") == [b"first", b"pending"]
    p.commit_transaction(15)
    assert read_all(txn_broker.bootstrap, topic_name, "read_committed") == [b"first", b"pending"]


def test_zombie_fencing_confluent(txn_broker: BrokerProcess, topic_name: str) -> None:
    tid = f"tid-{topic_name}"
    zombie = producer(txn_broker.bootstrap, tid)
    zombie.init_transactions(15)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie", partition=0)
    zombie.flush(15)
    fresh = producer(txn_broker.bootstrap, tid)
    fresh.init_transactions(15)  # fences the zombie and aborts its transaction
    zombie.produce(topic_name, value=b"late", partition=0)
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(15)
    err = info.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err
    fresh.begin_transaction()
    fresh.produce(topic_name, value=b"fresh", partition=0)
    fresh.commit_transaction(15)
    assert read_all(txn_broker.bootstrap, topic_name, "read_committed") == [b"fresh"]


def test_open_transaction_aborted_after_its_timeout(txn_broker: BrokerProcess, topic_name: str) -> None:
    p = producer(txn_broker.bootstrap, f"tid-{topic_name}", **{"transaction.timeout.ms": 1000})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic_name, value=b"abandoned", partition=0)
    p.flush(15)
    c = Consumer({"bootstrap.servers": txn_broker.bootstrap, "group.id": "to", "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # the coordinator aborts it: the LSO moves past it
            if c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=5)[1] == 2:
                break
            time.sleep(0.2)
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=5)[1] == 2
    finally:
        c.close()
    assert read_all(txn_broker.bootstrap, topic_name, "read_committed") == []
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_broker_restart_mid_transaction(broker_factory: BrokerFactory, topic_name: str) -> None:
    broker = broker_factory.start(extra_args=SMALL)
    tid = f"tid-{topic_name}"
    p = producer(broker.bootstrap, tid)
    p.init_transactions(15)
    p.begin_transaction()
    p.produce(topic_name, value=b"committed", partition=0)
    p.commit_transaction(15)
    p.begin_transaction()
    p.produce(topic_name, value=b"in-flight", partition=0)
    p.flush(15)
    broker.kill()  # crash with the transaction open
    del p
    broker.start()
    assert read_all(broker.bootstrap, topic_name, "read_committed", timeout_s=3) == [b"committed"]
    again = producer(broker.bootstrap, tid)
    again.init_transactions(30)  # the new incarnation aborts the recovered open transaction
    again.begin_transaction()
    again.produce(topic_name, value=b"after", partition=0)
    again.commit_transaction(15)
    assert read_all(broker.bootstrap, topic_name, "read_committed") == [b"committed", b"after"]
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == [b"committed", b"in-flight", b"after"]


def test_kafka_python_transactions(txn_broker: BrokerProcess, topic_name: str) -> None:
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(bootstrap_servers=txn_broker.bootstrap, transactional_id=f"kp-{topic_name}")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic_name, b"kp-commit", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic_name, b"kp-abort", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close(timeout=5)
    c = kafka.KafkaConsumer(bootstrap_servers=txn_broker.bootstrap, isolation_level="read_committed",
                            auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        c.assign([kafka.TopicPartition(topic_name, 0)])
        assert [m.value for m in c] == [b"kp-commit"]
    finally:
        c.close()
    assert read_all(txn_broker.bootstrap, topic_name, "read_uncommitted") == [b"kp-commit", b"kp-abort"]


def test_aiokafka_transactions(txn_broker: BrokerProcess, topic_name: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")

    async def run() -> list[bytes]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=txn_broker.bootstrap,
                                      transactional_id=f"aio-{topic_name}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic_name, b"aio-commit", partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic_name, b"aio-abort", partition=0)
            await p.abort_transaction()
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=txn_broker.bootstrap,
                                      isolation_level="read_committed", auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([aiokafka.TopicPartition(topic_name, 0)])
            got: list[bytes] = []
            batch = await c.getmany(timeout_ms=3000)
            for msgs in batch.values():
                got += [m.value for m in msgs]
            return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(run(), 60)) == [b"aio-commit"]
