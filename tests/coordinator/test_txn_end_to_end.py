"""The coordinator and per-partition producer state together, in the Jepsen scenarios.

A tiny in-memory "cluster" (no broker, no wire: the two pure state machines plus a list per
partition and a read_committed reader that honours the LSO and the aborted-transaction index)
replays the delayed-message schedules that produce aborted reads and torn transactions with
Kafka's original protocol, and checks which path rules them out:

- v1 without verification: the anomaly happens (this is why the guards exist);
- v1 with AddPartitionsToTxn verification (KIP-890 part 1): the late write is refused;
- v2 (KIP-890 part 2): the bumped epoch on the marker fences the late write / late EndTxn.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypeVar

import pytest

from kafkapy.coordinator.idempotence import (
    AbortedTxn,
    AppendOrigin,
    BatchMetadata,
    ControlType,
    ProducerBatch,
    ProducerStateError,
    ProducerStateManager,
)
from kafkapy.coordinator.txn import (
    CoordinatorResult,
    TopicPartition,
    TransactionCoordinator,
    TxnLogRecord,
    WriteTxnMarkers,
)
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")
P = TopicPartition("orders", 0)
Q = TopicPartition("payments", 3)
TIMEOUT = 60_000


class Guard(enum.Enum):
    NONE = "v1, no verification"
    VERIFY = "v1 + KIP-890 part 1 verification"
    V2 = "v2 (KIP-890 part 2)"


@dataclass
class Record:
    offset: int
    producer_id: int
    value: str
    control: bool = False


@dataclass
class Partition:
    state: ProducerStateManager = field(default_factory=ProducerStateManager)
    records: list[Record] = field(default_factory=list)
    aborted: list[AbortedTxn] = field(default_factory=list)

    @property
    def leo(self) -> int:
        return len(self.records)

    def append(self, record: Record) -> None:
        """Single replica: the high watermark follows the log end at once."""
        self.records.append(record)
        self.state.on_high_watermark_updated(self.leo)

    def read_committed(self) -> list[str]:
        lso = self.state.last_stable_offset(self.leo)
        out = []
        for r in self.records[:lso]:
            dropped = any(
                a.producer_id == r.producer_id and a.first_offset <= r.offset <= a.last_offset
                for a in self.aborted
            )
            if not r.control and not dropped:
                out.append(r.value)
        return out


class Cluster:
    """Partition leaders and the transaction coordinator, driven step by step."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.coord = TransactionCoordinator()
        self.partitions = {P: Partition(), Q: Partition()}
        self.now = 0
        self.log: list[TxnLogRecord] = []  # __transaction_state
        self.crash_after_markers: int | None = None  # crash after writing this many markers

    def run(self, result: CoordinatorResult[T]) -> T:
        for record in result.records:
            self.log.append(record)
            self.coord.replay(record.key, record.value)
        for action in result.markers:
            self.write_markers(action)
        return result.response

    def restart_coordinator(self) -> None:
        """The coordinator's broker restarts: load `__transaction_state`, finish what was cut."""
        self.crash_after_markers = None
        self.coord = TransactionCoordinator()
        for record in self.log:
            self.coord.replay(record.key, record.value)
        self.run(self.coord.load_complete(self.now))

    def write_markers(self, action: WriteTxnMarkers) -> None:
        for tp in sorted(action.partitions):
            if self.crash_after_markers is not None:
                if self.crash_after_markers == 0:
                    return  # the process died: no completion, the rest is never written
                self.crash_after_markers -= 1
            part = self.partitions[tp]
            batch = ProducerBatch(
                producer_id=action.producer_id,
                producer_epoch=action.producer_epoch,
                base_sequence=-1,
                last_offset_delta=0,
                base_offset=part.leo,
                max_timestamp=self.now,
                is_transactional=True,
                control=ControlType.COMMIT if action.commit else ControlType.ABORT,
                coordinator_epoch=action.coordinator_epoch,
            )
            result = part.state.check_and_update(batch, self.now, AppendOrigin.COORDINATOR)
            part.append(Record(part.leo, action.producer_id, "<marker>", control=True))
            part.aborted.extend(result.aborted)
        self.run(
            self.coord.complete_markers(
                action.transactional_id, action.producer_id, action.producer_epoch, self.now
            )
        )

    def produce(
        self, tp: TopicPartition, tid: str, pid: int, epoch: int, seq: int, value: str
    ) -> ErrorCode:
        """The partition leader's transactional produce path: local producer-state rules first
        (no coordinator round trip for a zombie), then, for the first write of a transaction at
        this partition, the configured guard, then the append."""
        part = self.partitions[tp]
        batch = ProducerBatch(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            last_offset_delta=0,
            base_offset=part.leo,
            max_timestamp=self.now,
            is_transactional=True,
        )
        try:
            pending = part.state.validate_append([batch], self.now)
        except ProducerStateError as exc:
            return exc.error_code
        if isinstance(pending, BatchMetadata):
            return ErrorCode.NONE  # a retry: answered with the original offsets
        entry = part.state.entry(pid)
        first_write = entry is None or entry.current_txn_first_offset is None
        if first_write and self.guard is not Guard.NONE:
            errors = self.run(
                self.coord.add_partitions(
                    tid,
                    pid,
                    epoch,
                    [tp],
                    self.now,
                    verify_only=self.guard is Guard.VERIFY,
                    transaction_version=2 if self.guard is Guard.V2 else 1,
                )
            )
            if errors[tp] is not ErrorCode.NONE:
                return ErrorCode(errors[tp])
        part.state.complete_append(pending)
        part.append(Record(part.leo, pid, value))
        return ErrorCode.NONE


class Producer:
    """A transactional client: v1 adds partitions itself, v2 lets the leaders do it."""

    def __init__(self, cluster: Cluster, tid: str = "app") -> None:
        self.cluster = cluster
        self.tid = tid
        self.v2 = cluster.guard is Guard.V2
        r = cluster.run(cluster.coord.init_producer_id(tid, TIMEOUT, cluster.now))
        assert r.error is ErrorCode.NONE
        self.pid: int = r.producer_id
        self.epoch: int = r.producer_epoch
        self.seq: dict[TopicPartition, int] = {}  # next sequence per partition

    def begin(self, tp: TopicPartition = P) -> None:
        if not self.v2:
            errors = self.cluster.run(
                self.cluster.coord.add_partitions(
                    self.tid, self.pid, self.epoch, [tp], self.cluster.now
                )
            )
            assert errors == {tp: ErrorCode.NONE}

    def prepare_send(
        self, value: str, tp: TopicPartition = P
    ) -> tuple[TopicPartition, str, int, int, int, str]:
        """A produce request as it leaves the client (it may be delivered much later)."""
        seq = self.seq.get(tp, 0)
        request = (tp, self.tid, self.pid, self.epoch, seq, value)
        self.seq[tp] = seq + 1
        return request

    def send(self, value: str, tp: TopicPartition = P) -> ErrorCode:
        return self.cluster.produce(*self.prepare_send(value, tp))

    def end(self, commit: bool) -> ErrorCode:
        r = self.cluster.run(
            self.cluster.coord.end_txn(
                self.tid,
                self.pid,
                self.epoch,
                commit,
                self.cluster.now,
                transaction_version=2 if self.v2 else 1,
            )
        )
        error = r.error
        if self.v2 and error is ErrorCode.NONE:
            self.pid, self.epoch = r.producer_id, r.producer_epoch
            self.seq = {}
        return error

    def bump_epoch(self) -> None:
        """After an abortable error (e.g. a timed-out send) the client re-initialises (KIP-360)."""
        r = self.cluster.run(
            self.cluster.coord.init_producer_id(
                self.tid, TIMEOUT, self.cluster.now, producer_id=self.pid, producer_epoch=self.epoch
            )
        )
        assert r.error is ErrorCode.NONE
        self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, {}


def aborted_read_schedule(guard: Guard) -> tuple[ErrorCode, list[str]]:
    """Jepsen's aborted read: a write of an aborted transaction is delivered after the abort
    marker, opens a new transaction at the partition, and the next commit makes it visible."""
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin()
    delayed = producer.prepare_send("x-from-aborted-txn")  # stuck in the network
    assert producer.end(commit=False) is ErrorCode.NONE  # the client gives up on it
    if guard is not Guard.V2:
        producer.bump_epoch()  # what a v1 client does after an unacknowledged send
    late = cluster.produce(*delayed)  # the network finally delivers it
    producer.begin()
    assert producer.send("y-committed") is ErrorCode.NONE
    assert producer.end(commit=True) is ErrorCode.NONE
    return late, cluster.partitions[P].read_committed()


def test_v1_without_verification_shows_the_aborted_read() -> None:
    late, visible = aborted_read_schedule(Guard.NONE)
    assert late is ErrorCode.NONE
    assert visible == ["x-from-aborted-txn", "y-committed"], "the anomaly the guards prevent"


def test_v1_verification_refuses_the_late_write() -> None:
    late, visible = aborted_read_schedule(Guard.VERIFY)
    # the partition still knows only epoch 0, so only the coordinator can tell it is stale
    assert late is ErrorCode.PRODUCER_FENCED
    assert visible == ["y-committed"]


def test_v2_epoch_bump_fences_the_late_write() -> None:
    late, visible = aborted_read_schedule(Guard.V2)
    # the write never reached the partition before the abort, so the coordinator never added it
    # and no marker went there: the implicit add with the pre-bump epoch is what refuses it
    assert late is ErrorCode.PRODUCER_FENCED
    assert visible == ["y-committed"]


def hanging_schedule(guard: Guard) -> tuple[ErrorCode, int, int]:
    """A late write after the commit marker with nothing following: without a guard it opens a
    transaction no marker will ever close, and the LSO stops (a hanging transaction)."""
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin()
    assert producer.send("a") is ErrorCode.NONE
    delayed = producer.prepare_send("b")  # never acknowledged: the client aborts
    assert producer.end(commit=False) is ErrorCode.NONE
    late = cluster.produce(*delayed)
    part = cluster.partitions[P]
    return late, part.state.last_stable_offset(part.leo), part.leo


@pytest.mark.parametrize("guard", list(Guard))
def test_hanging_transaction_only_without_a_guard(guard: Guard) -> None:
    late, lso, leo = hanging_schedule(guard)
    if guard is Guard.NONE:
        assert late is ErrorCode.NONE
        assert lso < leo, "the LSO is stuck behind a transaction nobody will end"
    else:
        expected = {
            Guard.VERIFY: ErrorCode.INVALID_TXN_STATE,  # the coordinator has no such transaction
            Guard.V2: ErrorCode.INVALID_PRODUCER_EPOCH,  # the abort marker carried epoch + 1
        }
        assert late is expected[guard]
        assert lso == leo


def late_end_txn_schedule(guard: Guard) -> tuple[ErrorCode, str]:
    """Jepsen's torn transaction: a delayed EndTxn(commit) of transaction 1 arrives while
    transaction 2 is running and commits it half-written."""
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin()
    assert producer.send("t1") is ErrorCode.NONE
    late_request = (producer.tid, producer.pid, producer.epoch, True)  # first attempt, delayed
    assert producer.end(commit=True) is ErrorCode.NONE  # the retry went through
    producer.begin()
    assert producer.send("t2-part1") is ErrorCode.NONE
    tid, pid, epoch, commit = late_request
    r = cluster.run(
        cluster.coord.end_txn(
            tid, pid, epoch, commit, cluster.now, transaction_version=2 if producer.v2 else 1
        )
    )
    return r.error, cluster.coord.transactions[tid].state.value


def test_v1_late_end_txn_tears_the_next_transaction() -> None:
    error, state = late_end_txn_schedule(Guard.VERIFY)
    assert error is ErrorCode.NONE
    assert state == "CompleteCommit", "transaction 2 was committed by transaction 1's EndTxn"


def test_v2_late_end_txn_is_fenced() -> None:
    error, state = late_end_txn_schedule(Guard.V2)
    assert error is ErrorCode.PRODUCER_FENCED
    assert state == "Ongoing"


@pytest.mark.parametrize("guard", list(Guard))
def test_committed_and_aborted_transactions_read_committed(guard: Guard) -> None:
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin()
    producer.send("c1")
    producer.send("c2")
    assert producer.end(commit=True) is ErrorCode.NONE
    producer.begin()
    producer.send("a1")
    assert cluster.partitions[P].read_committed() == ["c1", "c2"], "LSO holds back the open txn"
    assert producer.end(commit=False) is ErrorCode.NONE
    producer.begin()
    producer.send("c3")
    assert producer.end(commit=True) is ErrorCode.NONE
    assert cluster.partitions[P].read_committed() == ["c1", "c2", "c3"]


@pytest.mark.parametrize("guard", list(Guard))
def test_restart_between_markers_completes_the_commit(guard: Guard) -> None:
    """The coordinator dies after the commit marker reached one of two partitions; after the
    restart it resends both markers (the repeat is harmless) and completes the commit."""
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin(P)
    producer.begin(Q)
    assert producer.send("p1", P) is ErrorCode.NONE
    assert producer.send("q1", Q) is ErrorCode.NONE
    cluster.crash_after_markers = 1
    assert producer.end(commit=True) is ErrorCode.NONE
    assert cluster.partitions[P].read_committed() == ["p1"]
    assert cluster.partitions[Q].read_committed() == [], "LSO held at the open transaction"
    cluster.restart_coordinator()
    assert cluster.partitions[Q].read_committed() == ["q1"]
    assert cluster.partitions[P].read_committed() == ["p1"]
    assert cluster.coord.transactions["app"].state.value == "CompleteCommit"


@pytest.mark.parametrize("guard", list(Guard))
def test_restart_mid_transaction_then_timeout_aborts_and_fences(guard: Guard) -> None:
    cluster = Cluster(guard)
    producer = Producer(cluster)
    producer.begin(P)
    assert producer.send("lost", P) is ErrorCode.NONE
    cluster.restart_coordinator()
    assert cluster.coord.transactions["app"].state.value == "Ongoing"
    cluster.now += TIMEOUT + 1
    assert cluster.run(cluster.coord.abort_timed_out_transactions(cluster.now)) == ["app"]
    part = cluster.partitions[P]
    assert part.read_committed() == []
    assert part.state.last_stable_offset(part.leo) == part.leo, "nothing left hanging"
    # the zombie producer is fenced at the partition and at the coordinator
    assert producer.send("late", P) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert producer.end(commit=True) is ErrorCode.PRODUCER_FENCED
