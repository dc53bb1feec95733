"""The transactional processor records what its transactions did, not what it attempted.

The checker counts committed input offsets that go backwards (a rewind below an acknowledged
transaction's offsets means exactly-once output was written twice), so a `Commit` event must
stand for a transaction that committed. A commit answered with an abortable error is aborted
and rewound: its offsets were never committed, and the next transaction legitimately commits
lower ones (a seed 8 run reported `chaos-txn partition 0: txn committed 823 after txn committed
834` where 834 was such an aborted transaction's).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafkapy.chaos import workloads
from kafkapy.chaos.history import TOPIC_IDEMPOTENT, History
from kafkapy.chaos.workloads import TxnProcessor


class FakeMessage:
    def __init__(self, value: int, partition: int) -> None:
        self._value = value
        self._partition = partition

    def value(self) -> bytes:
        return str(self._value).encode()

    def partition(self) -> int:
        return self._partition


class FakeProducer:
    def __init__(self, commit_error: KafkaError | None) -> None:
        self.commit_error = commit_error
        self.calls: list[str] = []

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, topic: str, value: bytes, partition: int) -> None:
        self.calls.append("produce")

    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float) -> None:
        self.calls.append("send_offsets")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")
        if self.commit_error is not None:
            raise KafkaException(self.commit_error)

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append("abort")


class FakeConsumer:
    """Positioned at 834 on partition 0; the group's committed offset is 768."""

    def __init__(self) -> None:
        self.seeks: list[TopicPartition] = []

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC_IDEMPOTENT, 0)]

    def position(self, partitions: Any) -> list[TopicPartition]:
        return [TopicPartition(TOPIC_IDEMPOTENT, 0, 834)]

    def committed(self, partitions: Any, timeout: float) -> list[TopicPartition]:
        return [TopicPartition(TOPIC_IDEMPOTENT, 0, 768)]

    def seek(self, tp: TopicPartition) -> None:
        self.seeks.append(tp)

    def consumer_group_metadata(self) -> None:
        return None


def processor(history: History) -> TxnProcessor:
    return TxnProcessor(history, lambda: 1.0, bootstrap="127.0.0.1:1", extra={})


def test_an_aborted_commit_records_no_committed_offsets() -> None:
    history = History()
    producer = FakeProducer(KafkaError(KafkaError._FENCED, "abortable", txn_requires_abort=True))
    consumer = FakeConsumer()
    goes_on = processor(history)._transaction(
        producer, consumer, [FakeMessage(2302, 0)]  # type: ignore[arg-type, list-item]
    )
    assert goes_on, "aborted and rewound: the same clients go on"
    assert producer.calls[-2:] == ["commit", "abort"]
    assert [t.outcome for t in history.txns] == ["aborted"]
    assert history.commits == [], "an aborted transaction's offsets were recorded as committed"
    assert [(r.partition, r.offset) for r in history.resumes] == [(0, 768)]
    assert [tp.offset for tp in consumer.seeks] == [768]


def test_a_committed_transaction_records_its_offsets() -> None:
    history = History()
    goes_on = processor(history)._transaction(
        FakeProducer(None), FakeConsumer(), [FakeMessage(2302, 0)]  # type: ignore[arg-type, list-item]
    )
    assert goes_on
    assert [t.outcome for t in history.txns] == ["committed"]
    assert [(c.partition, c.offset) for c in history.commits] == [(0, 834)]


def test_a_commit_of_unknown_end_replaces_the_clients() -> None:
    history = History()
    producer = FakeProducer(KafkaError(KafkaError._STATE, "not retriable, not abortable"))
    goes_on = processor(history)._transaction(
        producer, FakeConsumer(), [FakeMessage(2302, 0)]  # type: ignore[arg-type, list-item]
    )
    assert not goes_on
    assert [t.outcome for t in history.txns] == ["unknown"]
    assert history.commits == []


def test_a_retriable_commit_failure_is_not_retried_once_the_run_stops() -> None:
    """Five tries of a 30 s commit would hold the thread past stop()'s 45 s join: once the run
    stops, the transaction's end is recorded unknown after the try in progress."""
    history = History()
    proc = processor(history)
    producer = FakeProducer(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
    proc.stopping.set()
    goes_on = proc._transaction(producer, FakeConsumer(), [FakeMessage(2302, 0)])  # type: ignore[arg-type, list-item]
    assert not goes_on
    assert producer.calls.count("commit") == 1
    assert [t.outcome for t in history.txns] == ["unknown"]
    running = FakeProducer(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))
    processor(History())._transaction(running, FakeConsumer(), [FakeMessage(2302, 0)])  # type: ignore[arg-type, list-item]
    assert running.calls.count("commit") == 5


class HangingProducer(FakeProducer):
    """send_offsets_to_transaction never returns, whatever its timeout (librdkafka issues
    5456/5511: a group coordinator cached on a broker that left the metadata)."""

    def __init__(self) -> None:
        super().__init__(None)
        self.release = threading.Event()

    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float) -> None:
        self.calls.append("send_offsets")
        self.release.wait()


@pytest.mark.timeout(30)
def test_a_send_offsets_that_ignores_its_timeout_replaces_the_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The processor gives up on the call after its timeout plus a slack, records the
    transaction's end as unknown (its offsets may yet commit: the checker allows either) and
    has the producer replaced; the thread is not stuck (stop() would find it so)."""
    monkeypatch.setattr(workloads, "CALL_TIMEOUT_S", 0.2)
    monkeypatch.setattr(workloads, "HUNG_SLACK_S", 0.1)
    history = History()
    producer = HangingProducer()
    started = time.monotonic()
    goes_on = processor(history)._transaction(
        producer, FakeConsumer(), [FakeMessage(2302, 0)]  # type: ignore[arg-type, list-item]
    )
    assert time.monotonic() - started < 5
    assert not goes_on
    assert "commit" not in producer.calls
    assert [t.outcome for t in history.txns] == ["unknown"]
    assert history.commits == []
    assert any("did not return" in k for k in history.client_errors)
    producer.release.set()
