"""Unit tests: every transaction-coordinator operation and transition, valid and invalid.

`Runtime` drives the coordinator as the server must (rule 1 of coordinator.py): append the
records, replay them, then answer; each test also checks that a reload of the log reproduces
the state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TypeVar

import pytest

from kafkapy.coordinator.txn import (
    OFFSETS_TOPIC,
    VALID_PREVIOUS_STATES,
    AddPartitionsTxn,
    CoordinatorResult,
    EndTxnResult,
    IllegalTransitionError,
    InitProducerIdResult,
    TopicPartition,
    TransactionCoordinator,
    TransactionMetadata,
    TxnLogRecord,
    TxnState,
    WriteTxnMarkers,
    check_transition,
    partition_for,
)
from kafkapy.coordinator.txn.records import encode_metadata_key, encode_metadata_value
from kafkapy.coordinator.txn.state import MAX_PRODUCER_EPOCH
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")
TIMEOUT = 60_000
S = TxnState
E = ErrorCode


class Runtime:
    """Append records to a log, replay them, then answer; collects marker actions."""

    def __init__(self, **config: int) -> None:
        self.config = config
        self.coord = TransactionCoordinator(**config)
        self.log: list[TxnLogRecord] = []
        self.now = 1_000
        self.markers: list[WriteTxnMarkers] = []
        self.last_records: tuple[TxnLogRecord, ...] = ()

    def run(self, result: CoordinatorResult[T]) -> T:
        for record in result.records:
            assert 0 <= record.partition < self.coord.num_partitions
            self.log.append(record)
            self.coord.replay(record.key, record.value)
        self.markers.extend(result.markers)
        self.last_records = result.records
        return result.response

    def records_written(self) -> int:
        return len(self.last_records)

    def md(self, tid: str) -> TransactionMetadata:
        return self.coord.transactions[tid]

    def reload(self, log: list[TxnLogRecord] | None = None) -> TransactionCoordinator:
        fresh = TransactionCoordinator(**self.config)
        for record in self.log if log is None else log:
            fresh.replay(record.key, record.value)
        return fresh

    def compacted_log(self) -> list[TxnLogRecord]:
        """What the log cleaner keeps: the latest record per key."""
        latest: dict[bytes, TxnLogRecord] = {}
        for record in self.log:
            latest.pop(record.key, None)
            latest[record.key] = record
        return list(latest.values())

    def write_markers(self) -> None:
        markers, self.markers = self.markers, []
        for m in markers:
            assert (
                self.run(
                    self.coord.complete_markers(
                        m.transactional_id, m.producer_id, m.producer_epoch, self.now
                    )
                )
                is E.NONE
            )

    # shorthands -------------------------------------------------------------

    def init(
        self, tid: str | None = "t", timeout: int = TIMEOUT, **kw: int
    ) -> InitProducerIdResult:
        return self.run(self.coord.init_producer_id(tid, timeout, self.now, **kw))

    def add(
        self,
        pid: int,
        epoch: int,
        *names: str,
        tid: str = "t",
        verify_only: bool = False,
        transaction_version: int = 1,
    ) -> dict[TopicPartition, ErrorCode]:
        return self.run(
            self.coord.add_partitions(
                tid,
                pid,
                epoch,
                tps(*names),
                self.now,
                verify_only=verify_only,
                transaction_version=transaction_version,
            )
        )

    def end(
        self, pid: int, epoch: int, commit: bool, tid: str = "t", version: int = 1
    ) -> EndTxnResult:
        return self.run(
            self.coord.end_txn(tid, pid, epoch, commit, self.now, transaction_version=version)
        )


def tps(*names: str) -> list[TopicPartition]:
    """`tps("a-0", "b-3")` -> partitions a/0 and b/3."""
    out = []
    for name in names:
        topic, _, partition = name.rpartition("-")
        out.append(TopicPartition(topic, int(partition)))
    return out


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime()
    yield runtime
    # every test: loading the log (whole, or compacted) reproduces the state
    assert runtime.reload().transactions == runtime.coord.transactions
    assert runtime.reload(runtime.compacted_log()).transactions == runtime.coord.transactions


def ongoing(rt: Runtime, *names: str) -> tuple[int, int]:
    r = rt.init()
    assert r.error is E.NONE
    assert set(rt.add(r.producer_id, r.producer_epoch, *names).values()) == {E.NONE}
    return r.producer_id, r.producer_epoch


# ---------------------------------------------------------------- transition table


@pytest.mark.parametrize("new", list(TxnState))
@pytest.mark.parametrize("old", list(TxnState))
def test_transition_table(old: TxnState, new: TxnState) -> None:
    if old in VALID_PREVIOUS_STATES[new]:
        check_transition(old, new)
    else:
        with pytest.raises(IllegalTransitionError):
            check_transition(old, new)


def test_new_transactional_id_starts_empty() -> None:
    check_transition(None, S.EMPTY)
    with pytest.raises(IllegalTransitionError):
        check_transition(None, S.ONGOING)


def test_table_matches_kafka_shape() -> None:
    assert VALID_PREVIOUS_STATES[S.PREPARE_COMMIT] == {S.ONGOING}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert VALID_PREVIOUS_STATES[S.PREPARE_EPOCH_FENCE] == {S.ONGOING}
    assert S.PREPARE_EPOCH_FENCE in VALID_PREVIOUS_STATES[S.PREPARE_ABORT]


# ---------------------------------------------------------------- partitioning


def test_partition_for_matches_java_hash_code() -> None:
    assert partition_for("") == 0
    assert partition_for("hello") == 99162322 % 50
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Kafka's abs maps to 0
    assert partition_for("polygenelubricants") == 0
    # a character outside the BMP hashes as its two UTF-16 code units
    assert partition_for("\N{GRINNING FACE}", 2**31 - 1) == 1772899
    assert partition_for("hello", 7) == 99162322 % 7


def test_records_go_to_the_transactional_ids_partition(rt: Runtime) -> None:
    rt.init("my-txn")
    assert rt.log[-1].partition == partition_for("my-txn")


# ---------------------------------------------------------------- InitProducerId


def test_init_without_transactional_id_allocates_unique_ids_in_blocks() -> None:
    rt = Runtime(producer_id_block_size=3)
    ids = []
    writes = []
    for _ in range(7):
        ids.append(rt.init(None).producer_id)
        writes.append(rt.records_written())
    assert ids == list(range(7))
    assert writes == [1, 0, 0, 1, 0, 0, 1], "one block record per three ids"
    assert rt.coord.producer_id_watermark == 9


def test_producer_ids_are_unique_across_restarts() -> None:
    rt = Runtime(producer_id_block_size=3)
    first = {rt.init(None).producer_id for _ in range(4)}  # ids 0-3, watermark 6
    restarted = Runtime(producer_id_block_size=3)
    restarted.log = list(rt.log)
    restarted.coord = rt.reload()
    restarted.run(restarted.coord.load_complete(restarted.now))
    after = [restarted.init(None).producer_id for _ in range(4)]
    assert not first & set(after)
    assert after == [6, 7, 8, 9], "the loaded block is skipped, never reused"


def test_init_new_transactional_id(rt: Runtime) -> None:
    r = rt.init("t")
    assert r == InitProducerIdResult(E.NONE, 0, 0)
    md = rt.md("t")
    assert (md.state, md.producer_id, md.producer_epoch, md.txn_timeout_ms) == (
        S.EMPTY,
        0,
        0,
        TIMEOUT,
    )
    assert md.partitions == frozenset()


@pytest.mark.parametrize("timeout", [0, -5, 900_001])
def test_init_rejects_bad_timeout(rt: Runtime, timeout: int) -> None:
    assert rt.init("t", timeout).error is E.INVALID_TRANSACTION_TIMEOUT
    assert rt.records_written() == 0


def test_init_rejects_empty_id_and_half_identity(rt: Runtime) -> None:
    assert rt.init("").error is E.INVALID_REQUEST
    assert rt.init("t", producer_id=5).error is E.INVALID_REQUEST
    assert rt.log == []


def test_init_again_bumps_epoch(rt: Runtime) -> None:
    rt.init()
    r = rt.init()
    assert r == InitProducerIdResult(E.NONE, 0, 1)
    assert rt.md("t").state is S.EMPTY


def test_init_while_ongoing_fences_and_aborts_previous_incarnation(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0", "b-1")
    r = rt.init()
    assert r.error is E.CONCURRENT_TRANSACTIONS
    assert rt.records_written() == 2
    assert rt.reload(rt.log[:-1]).transactions["t"].state is S.PREPARE_EPOCH_FENCE
    assert rt.md("t").state is S.PREPARE_ABORT
    assert rt.markers == [
        WriteTxnMarkers("t", pid, epoch + 1, 0, False, frozenset(tps("a-0", "b-1")))
    ]
    # the zombie is fenced everywhere
    assert rt.end(pid, epoch, commit=True).error is E.PRODUCER_FENCED
    assert set(rt.add(pid, epoch, "c-0").values()) == {E.PRODUCER_FENCED}
    assert rt.init().error is E.CONCURRENT_TRANSACTIONS, "until the abort markers are written"
    rt.write_markers()
    assert rt.md("t").state is S.COMPLETE_ABORT
    assert rt.init() == InitProducerIdResult(E.NONE, pid, epoch + 2)


@pytest.mark.parametrize("commit", [True, False])
def test_init_during_prepare_is_concurrent(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, commit)
    assert rt.init().error is E.CONCURRENT_TRANSACTIONS
    assert rt.records_written() == 0


def seed_epoch(rt: Runtime, epoch: int) -> None:
    """Jump "t" to `epoch` by replaying a record, as loading an old log would."""
    rt.init()
    md = replace(rt.md("t"), producer_epoch=epoch)
    rt.run(
        CoordinatorResult(
            (
                TxnLogRecord(
                    partition_for("t"), encode_metadata_key("t"), encode_metadata_value(md)
                ),
            ),
            None,
        )
    )


def test_init_with_exhausted_epoch_allocates_new_producer_id(rt: Runtime) -> None:
    seed_epoch(rt, MAX_PRODUCER_EPOCH - 1)
    assert rt.md("t").producer_epoch == MAX_PRODUCER_EPOCH - 1
    r = rt.init()
    assert (r.error, r.producer_epoch) == (E.NONE, 0)
    assert r.producer_id != 0
    md = rt.md("t")
    assert (md.last_producer_id, md.last_producer_epoch) == (0, MAX_PRODUCER_EPOCH - 1)


def test_init_with_current_identity_bumps_and_its_retry_is_answered_again(rt: Runtime) -> None:
    rt.init()
    r = rt.init(producer_id=0, producer_epoch=0)
    assert r == InitProducerIdResult(E.NONE, 0, 1)
    retry = rt.init(producer_id=0, producer_epoch=0)
    assert retry == r
    assert rt.records_written() == 0


def test_init_with_stale_identity_is_fenced(rt: Runtime) -> None:
    rt.init()
    rt.init()
    rt.init()  # epoch 2, last epoch 1
    assert rt.init(producer_id=0, producer_epoch=0).error is E.PRODUCER_FENCED
    assert rt.init(producer_id=42, producer_epoch=0).error is E.INVALID_PRODUCER_ID_MAPPING


# ---------------------------------------------------------------- AddPartitionsToTxn v1-v3


def test_add_partitions_starts_transaction(rt: Runtime) -> None:
    rt.init()
    rt.now = 5_000
    assert rt.add(0, 0, "a-0", "a-1") == dict.fromkeys(tps("a-0", "a-1"), E.NONE)
    md = rt.md("t")
    assert (md.state, md.partitions, md.txn_start_timestamp) == (
        S.ONGOING,
        frozenset(tps("a-0", "a-1")),
        5_000,
    )


def test_add_more_partitions_keeps_start_time(rt: Runtime) -> None:
    ongoing(rt, "a-0")
    start = rt.md("t").txn_start_timestamp
    rt.now += 10
    rt.add(0, 0, "b-0")
    md = rt.md("t")
    assert md.partitions == frozenset(tps("a-0", "b-0"))
    assert md.txn_start_timestamp == start


def test_add_known_partitions_writes_nothing(rt: Runtime) -> None:
    ongoing(rt, "a-0", "b-0")
    assert rt.add(0, 0, "a-0") == {TopicPartition("a", 0): E.NONE}
    assert rt.records_written() == 0


def test_add_partitions_identity_errors(rt: Runtime) -> None:
    assert set(rt.add(0, 0, "a-0").values()) == {E.INVALID_PRODUCER_ID_MAPPING}
    rt.init()
    rt.init()
    assert set(rt.add(9, 1, "a-0").values()) == {E.INVALID_PRODUCER_ID_MAPPING}
    assert set(rt.add(0, 0, "a-0").values()) == {E.PRODUCER_FENCED}
    assert set(rt.add(0, 2, "a-0").values()) == {E.PRODUCER_FENCED}
    assert set(rt.add(0, 1, "a-0", tid="").values()) == {E.INVALID_REQUEST}
    assert rt.md("t").state is S.EMPTY


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_while_markers_pending_is_concurrent(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, commit)
    assert rt.add(pid, epoch, "b-0") == {TopicPartition("b", 0): E.CONCURRENT_TRANSACTIONS}


@pytest.mark.parametrize("commit", [True, False])
def test_add_partitions_after_completion_starts_next_transaction(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, commit)
    rt.write_markers()
    rt.now += 100
    rt.add(pid, epoch, "b-0")
    md = rt.md("t")
    assert (md.state, md.partitions, md.txn_start_timestamp) == (
        S.ONGOING,
        frozenset(tps("b-0")),
        rt.now,
    )


def test_add_offsets_adds_the_groups_offsets_partition(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    assert rt.run(rt.coord.add_offsets("t", pid, epoch, "my-group", rt.now)) is E.NONE
    assert TopicPartition(OFFSETS_TOPIC, partition_for("my-group")) in rt.md("t").partitions
    assert rt.run(rt.coord.add_offsets("t", pid, epoch + 1, "g", rt.now)) is E.PRODUCER_FENCED


# ---------------------------------------------------------------- AddPartitionsToTxn v4+


def test_verify_only_answers_membership_without_writing(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    assert rt.add(pid, epoch, "a-0", "b-0", verify_only=True) == {
        TopicPartition("a", 0): E.NONE,
        TopicPartition("b", 0): E.INVALID_TXN_STATE,
    }
    assert rt.records_written() == 0
    assert rt.md("t").partitions == frozenset(tps("a-0"))


def test_verify_only_refuses_a_late_write_of_a_finished_transaction(rt: Runtime) -> None:
    """KIP-890 part 1: a delayed produce of the committed transaction cannot slip into the log."""
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, True)
    assert rt.add(pid, epoch, "a-0", verify_only=True) == {
        TopicPartition("a", 0): E.INVALID_TXN_STATE
    }
    rt.write_markers()
    assert rt.add(pid, epoch, "a-0", verify_only=True) == {
        TopicPartition("a", 0): E.INVALID_TXN_STATE
    }


def test_batched_add_answers_each_transaction(rt: Runtime) -> None:
    a = rt.init("ta")
    b = rt.init("tb")
    rt.init("tb")  # tb now at epoch 1: the batch's epoch 0 is fenced
    result = rt.run(
        rt.coord.add_partitions_batch(
            [
                AddPartitionsTxn("ta", a.producer_id, 0, tuple(tps("x-0", "x-1"))),
                AddPartitionsTxn("tb", b.producer_id, 0, tuple(tps("y-0"))),
                AddPartitionsTxn("tc", 77, 0, tuple(tps("z-0"))),
            ],
            rt.now,
        )
    )
    assert result == {
        "ta": dict.fromkeys(tps("x-0", "x-1"), E.NONE),
        "tb": {TopicPartition("y", 0): E.PRODUCER_FENCED},
        "tc": {TopicPartition("z", 0): E.INVALID_PRODUCER_ID_MAPPING},
    }
    assert rt.md("ta").state is S.ONGOING
    assert rt.md("ta").transaction_version == 2
    assert rt.md("tb").state is S.EMPTY


def test_batched_add_refuses_a_repeated_transactional_id(rt: Runtime) -> None:
    a = rt.init("ta")
    result = rt.run(
        rt.coord.add_partitions_batch(
            [
                AddPartitionsTxn("ta", a.producer_id, 0, tuple(tps("x-0"))),
                AddPartitionsTxn("ta", a.producer_id, 0, tuple(tps("x-1"))),
            ],
            rt.now,
        )
    )
    assert result == {"ta": dict.fromkeys(tps("x-0", "x-1"), E.INVALID_REQUEST)}
    assert rt.records_written() == 0


# ---------------------------------------------------------------- EndTxn v1


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v1_prepares_then_markers_complete(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0", "b-2")
    assert rt.end(pid, epoch, commit) == EndTxnResult(E.NONE, pid, epoch)
    assert rt.md("t").state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert rt.markers == [WriteTxnMarkers("t", pid, epoch, 0, commit, frozenset(tps("a-0", "b-2")))]
    # a retry while markers are written: the client retries again later
    assert rt.end(pid, epoch, commit).error is E.CONCURRENT_TRANSACTIONS
    assert rt.end(pid, epoch, not commit).error is E.INVALID_TXN_STATE
    rt.write_markers()
    md = rt.md("t")
    assert md.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert md.partitions == frozenset()
    assert md.producer_epoch == epoch, "v1 keeps the epoch"
    assert rt.end(pid, epoch, commit).error is E.NONE, "a retry after completion succeeds"
    assert rt.records_written() == 0
    assert rt.end(pid, epoch, not commit).error is E.INVALID_TXN_STATE


@pytest.mark.parametrize("version", [1, 2])
def test_end_txn_identity_errors(rt: Runtime, version: int) -> None:
    assert rt.end(0, 0, True, version=version).error is E.INVALID_PRODUCER_ID_MAPPING
    pid, epoch = ongoing(rt, "a-0")
    assert rt.end(pid + 1, epoch, True, version=version).error is E.INVALID_PRODUCER_ID_MAPPING
    assert rt.end(pid, epoch + 1, True, version=version).error is E.PRODUCER_FENCED
    assert rt.end(pid, epoch, True, tid="", version=version).error is E.INVALID_REQUEST
    assert rt.md("t").state is S.ONGOING


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v1_without_transaction_is_invalid(rt: Runtime, commit: bool) -> None:
    rt.init()
    assert rt.end(0, 0, commit).error is E.INVALID_TXN_STATE
    assert rt.records_written() == 0


def test_complete_markers_stale_call_changes_nothing(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    assert rt.run(rt.coord.complete_markers("t", pid, epoch, rt.now)) is E.INVALID_TXN_STATE
    rt.end(pid, epoch, True)
    assert rt.run(rt.coord.complete_markers("t", pid, epoch + 1, rt.now)) is E.INVALID_TXN_STATE
    assert rt.run(rt.coord.complete_markers("nope", pid, epoch, rt.now)) is E.INVALID_TXN_STATE
    assert rt.md("t").state is S.PREPARE_COMMIT


# ---------------------------------------------------------------- EndTxn v2 (KIP-890)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v2_bumps_epoch_and_markers_carry_it(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0")
    r = rt.end(pid, epoch, commit, version=2)
    assert r == EndTxnResult(E.NONE, pid, epoch + 1)
    assert rt.markers == [WriteTxnMarkers("t", pid, epoch + 1, 0, commit, frozenset(tps("a-0")))]
    # the old epoch is fenced at once: a delayed EndTxn cannot end the next transaction
    assert rt.add(pid, epoch, "a-0") == {TopicPartition("a", 0): E.PRODUCER_FENCED}
    rt.write_markers()
    assert (rt.md("t").state, rt.md("t").producer_epoch) == (
        S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT,
        epoch + 1,
    )


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_v2_retry_is_answered_again(rt: Runtime, commit: bool) -> None:
    pid, epoch = ongoing(rt, "a-0")
    first = rt.end(pid, epoch, commit, version=2)
    assert rt.end(pid, epoch, commit, version=2) == first
    assert rt.records_written() == 0
    rt.write_markers()
    assert rt.end(pid, epoch, commit, version=2) == first
    assert rt.end(pid, epoch, not commit, version=2).error is E.PRODUCER_FENCED


def test_end_txn_v2_abort_of_empty_transaction_completes_in_one_write(rt: Runtime) -> None:
    rt.init()
    r = rt.end(0, 0, False, version=2)
    assert r == EndTxnResult(E.NONE, 0, 1)
    assert rt.records_written() == 2
    assert rt.markers == []
    assert (rt.md("t").state, rt.md("t").producer_epoch) == (S.COMPLETE_ABORT, 1)


def test_end_txn_v2_commit_without_transaction_is_invalid(rt: Runtime) -> None:
    rt.init()
    assert rt.end(0, 0, True, version=2).error is E.INVALID_TXN_STATE
    pid, epoch = 0, 0
    rt.add(pid, epoch, "a-0", transaction_version=2)
    r = rt.end(pid, epoch, True, version=2)
    rt.write_markers()
    assert rt.end(r.producer_id, r.producer_epoch, True, version=2).error is E.INVALID_TXN_STATE


def test_end_txn_v2_while_markers_pending_is_concurrent(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    r = rt.end(pid, epoch, True, version=2)
    # the client moved on with the new epoch, its next transaction's first write waits
    assert rt.add(r.producer_id, r.producer_epoch, "b-0", transaction_version=2) == {
        TopicPartition("b", 0): E.CONCURRENT_TRANSACTIONS
    }
    assert (
        rt.end(r.producer_id, r.producer_epoch, True, version=2).error is E.CONCURRENT_TRANSACTIONS
    )


def test_end_txn_v2_with_exhausted_epoch_moves_to_new_producer_id(rt: Runtime) -> None:
    seed_epoch(rt, MAX_PRODUCER_EPOCH - 1)
    pid, epoch = 0, MAX_PRODUCER_EPOCH - 1
    rt.add(pid, epoch, "a-0", transaction_version=2)
    r = rt.end(pid, epoch, True, version=2)
    assert r.error is E.NONE
    assert r.producer_epoch == 0
    new_pid = r.producer_id
    assert new_pid != pid
    # markers use the old id with the last epoch; the client already holds the new id
    assert rt.markers == [
        WriteTxnMarkers("t", pid, MAX_PRODUCER_EPOCH, 0, True, frozenset(tps("a-0")))
    ]
    assert rt.add(new_pid, 0, "b-0") == {TopicPartition("b", 0): E.CONCURRENT_TRANSACTIONS}
    assert rt.init(producer_id=new_pid, producer_epoch=0).error is E.CONCURRENT_TRANSACTIONS
    assert rt.end(pid, epoch, True, version=2) == r, "retry with the old identity"
    rt.write_markers()
    md = rt.md("t")
    assert (md.producer_id, md.producer_epoch, md.state) == (new_pid, 0, S.COMPLETE_COMMIT)
    assert rt.add(new_pid, 0, "b-0") == {TopicPartition("b", 0): E.NONE}


# ---------------------------------------------------------------- timeouts and expiration


def test_transaction_older_than_timeout_is_aborted_and_fenced(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    start = rt.md("t").txn_start_timestamp
    assert rt.run(rt.coord.abort_timed_out_transactions(start + TIMEOUT)) == []
    assert rt.records_written() == 0
    assert rt.run(rt.coord.abort_timed_out_transactions(start + TIMEOUT + 1)) == ["t"]
    md = rt.md("t")
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, epoch + 1)
    assert rt.markers == [WriteTxnMarkers("t", pid, epoch + 1, 0, False, frozenset(tps("a-0")))]
    assert rt.end(pid, epoch, True).error is E.PRODUCER_FENCED
    rt.write_markers()
    assert rt.md("t").state is S.COMPLETE_ABORT


def test_only_ongoing_transactions_time_out(rt: Runtime) -> None:
    rt.init("idle")
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, True)
    assert rt.run(rt.coord.abort_timed_out_transactions(rt.now + 10 * TIMEOUT)) == []


def test_idle_transactional_id_expires(rt: Runtime) -> None:
    rt.init("old")
    ongoing(rt, "a-0")  # "t" stays Ongoing: never expires
    expiry = rt.coord.transactional_id_expiration_ms
    assert rt.run(rt.coord.expire_transactional_ids(rt.now + expiry - 1)) == []
    assert rt.run(rt.coord.expire_transactional_ids(rt.now + expiry)) == ["old"]
    assert rt.log[-1].value is None
    assert "old" not in rt.coord.transactions
    desc = rt.coord.describe_transactions(["old"])
    assert desc[0].error is E.TRANSACTIONAL_ID_NOT_FOUND
    r = rt.init("old")
    assert (r.error, r.producer_epoch) == (E.NONE, 0)
    assert r.producer_id != 0, "a dead id starts afresh with a new producer id"


# ---------------------------------------------------------------- load / describe / list


def test_load_complete_resends_markers_and_finishes_fences(rt: Runtime) -> None:
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, True)
    rt.init("u")
    rt.add(1, 0, "b-0", tid="u")
    rt.run(rt.coord.init_producer_id("u", TIMEOUT, rt.now))  # fences u: PrepareAbort
    # simulate a log that ends right after the fence record (the abort record was lost)
    log = rt.log[:-1]
    fresh = rt.reload(log)
    assert fresh.transactions["u"].state is S.PREPARE_EPOCH_FENCE
    result = fresh.load_complete(rt.now)
    assert result.markers == (
        WriteTxnMarkers("t", pid, epoch, 0, True, frozenset(tps("a-0"))),
        WriteTxnMarkers("u", 1, 1, 0, False, frozenset(tps("b-0"))),
    )
    for record in result.records:
        fresh.replay(record.key, record.value)
    assert fresh.transactions["u"].state.value == "PrepareAbort"
    assert fresh.pending_markers() == list(result.markers)


def test_describe_transactions(rt: Runtime) -> None:
    rt.now = 7_000
    ongoing(rt, "b-1", "a-0")
    [desc, missing] = rt.coord.describe_transactions(["t", "zz"])
    assert (desc.error, desc.state, desc.producer_id, desc.producer_epoch) == (
        E.NONE,
        "Ongoing",
        0,
        0,
    )
    assert (desc.txn_timeout_ms, desc.txn_start_timestamp) == (TIMEOUT, 7_000)
    assert desc.partitions == tuple(tps("a-0", "b-1"))
    assert missing.error is E.TRANSACTIONAL_ID_NOT_FOUND


def test_list_transactions_filters(rt: Runtime) -> None:
    rt.now = 0
    rt.init("e")  # Empty, pid 0
    ongoing(rt, "a-0")  # "t" Ongoing, pid 1, started at 0
    now = 5_000

    def ids(
        states: list[str] | None = None, pids: list[int] | None = None, dur: int = -1
    ) -> list[str]:
        result = rt.coord.list_transactions(
            now, state_filters=states or [], producer_id_filters=pids or [], duration_filter_ms=dur
        )
        return [row.transactional_id for row in result.transactions]

    assert ids() == ["e", "t"]
    assert ids(states=["Ongoing"]) == ["t"]
    assert ids(states=["Ongoing", "Empty"]) == ["e", "t"]
    assert ids(pids=[0]) == ["e"]
    assert ids(states=["Empty"], pids=[1]) == []
    assert ids(dur=4_999) == ["t"]
    assert ids(dur=5_000) == []
    result = rt.coord.list_transactions(now, state_filters=["Bogus", "Empty"])
    assert result.unknown_state_filters == ("Bogus",)
    assert [row.state for row in result.transactions] == ["Empty"]


@pytest.mark.parametrize("commit", [True, False])
def test_completed_transactional_id_expires_but_prepared_does_not(
    rt: Runtime, commit: bool
) -> None:
    pid, epoch = ongoing(rt, "a-0")
    rt.end(pid, epoch, commit)
    later = rt.now + rt.coord.transactional_id_expiration_ms
    assert rt.run(rt.coord.expire_transactional_ids(later)) == [], "markers still pending"
    rt.write_markers()
    later = rt.now + rt.coord.transactional_id_expiration_ms
    assert rt.run(rt.coord.expire_transactional_ids(later)) == ["t"]


def test_add_no_partitions_changes_nothing(rt: Runtime) -> None:
    rt.init()
    assert rt.add(0, 0) == {}
    assert rt.records_written() == 0
    assert rt.md("t").state is S.EMPTY


def test_unload_partition_forgets_only_its_ids(rt: Runtime) -> None:
    rt.init("hello")
    rt.init("polygenelubricants")
    rt.coord.unload_partition(partition_for("hello"))
    assert set(rt.coord.transactions) == {"polygenelubricants"}
    rt.coord.unload_partition(0)
    assert rt.coord.transactions == {}
    rt.log.clear()  # the fixture's reload check does not apply after an unload
