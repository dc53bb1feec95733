"""Unit tests: one per producer-state rule (see kafkapy/coordinator/idempotence/producer_state.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.idempotence import (
    AbortedTxn,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ControlType,
    CorruptSnapshotError,
    PendingAppend,
    ProducerBatch,
    ProducerSnapshot,
    ProducerStateEntry,
    ProducerStateError,
    ProducerStateManager,
    UpdateResult,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
    increment_sequence,
)
from kafkapy.coordinator.idempotence.producer_state import INT32_MAX
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.records import (
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    parse_batch_header,
    parse_control_record,
)

EXPIRY = 10_000


@dataclass
class Partition:
    """A partition's offsets and its producer state, as the broker will drive them."""

    mgr: ProducerStateManager = field(
        default_factory=lambda: ProducerStateManager(producer_id_expiration_ms=EXPIRY)
    )
    leo: int = 0
    now: int = 1_000
    written: list[ProducerBatch] = field(default_factory=list)

    def batch(
        self, pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False
    ) -> ProducerBatch:
        return ProducerBatch(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            last_offset_delta=n - 1,
            base_offset=self.leo,
            max_timestamp=self.now,
            is_transactional=txn,
        )

    def append(
        self, batch: ProducerBatch, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> UpdateResult:
        result = self.mgr.check_and_update(batch, self.now, origin)
        if result.duplicate is None:
            self.leo = batch.last_offset + 1
            self.written.append(batch)
        return result

    def produce(
        self, pid: int, epoch: int, seq: int, n: int = 1, *, txn: bool = False
    ) -> UpdateResult:
        return self.append(self.batch(pid, epoch, seq, n, txn=txn))

    def marker(
        self, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> UpdateResult:
        return self.append(
            ProducerBatch(
                producer_id=pid,
                producer_epoch=epoch,
                base_sequence=-1,
                last_offset_delta=0,
                base_offset=self.leo,
                max_timestamp=self.now,
                is_transactional=True,
                control=ControlType.COMMIT if commit else ControlType.ABORT,
                coordinator_epoch=coordinator_epoch,
            ),
            AppendOrigin.COORDINATOR,
        )

    def error(self, batch: ProducerBatch, origin: AppendOrigin = AppendOrigin.CLIENT) -> ErrorCode:
        before = self.mgr.export_snapshot()
        with pytest.raises(ProducerStateError) as info:
            self.mgr.check_and_update(batch, self.now, origin)
        assert self.mgr.export_snapshot() == before, "a refused batch must not change state"
        return info.value.error_code


def test_sequence_arithmetic_wraps_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(-1, 0)
    assert not in_sequence(INT32_MAX, 1)
    assert not in_sequence(3, 3)


def test_batch_without_producer_id_keeps_no_state() -> None:
    p = Partition()
    assert p.produce(-1, -1, -1, 3) == UpdateResult()
    assert p.mgr.producers == {}
    assert p.mgr.last_map_offset == 3


def test_first_batch_at_sequence_zero_is_appended_and_remembered() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.producer_epoch == 0
    assert entry.batches == [BatchMetadata(0, 2, 0, 2, p.now)]
    assert entry.last_timestamp == p.now


def test_in_sequence_batches_append() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    p.produce(7, 0, 3, 2)
    p.produce(7, 0, 5, 1)
    assert p.leo == 6
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.last_seq == 5


def test_retry_of_a_written_batch_returns_original_offsets_and_writes_nothing() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    p.produce(7, 0, 3, 2)
    before = p.mgr.export_snapshot()
    result = p.produce(7, 0, 0, 3)
    assert result.duplicate == BatchMetadata(0, 2, 0, 2, p.now)
    assert p.leo == 5
    assert p.mgr.export_snapshot() == before


def test_each_of_the_last_five_batches_is_recognised_and_the_sixth_oldest_is_not() -> None:
    p = Partition()
    for seq in range(6):
        p.produce(7, 0, seq)
    for seq in range(1, 6):
        dup = p.produce(7, 0, seq).duplicate
        assert dup is not None
        assert dup.first_offset == seq
    assert p.error(p.batch(7, 0, 0)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_retry_with_different_length_is_not_a_duplicate() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    assert p.error(p.batch(7, 0, 0, 2)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    assert p.error(p.batch(7, 0, 4)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_older_epoch_is_invalid_producer_epoch() -> None:
    p = Partition()
    p.produce(7, 3, 0)
    assert p.error(p.batch(7, 2, 1)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.error(p.batch(7, 2, 0)) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_epoch_bump_resets_sequence_to_zero() -> None:
    p = Partition()
    p.produce(7, 0, 0, 10)
    assert p.error(p.batch(7, 1, 10)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    p.produce(7, 1, 0, 2)
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert [b.first_seq for b in entry.batches] == [0]
    # the old epoch's batches are forgotten: their retry is now a zombie write
    assert p.error(p.batch(7, 0, 0, 10)) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_unknown_producer_must_start_at_zero() -> None:
    p = Partition()
    assert p.error(p.batch(9, 0, 5)) is ErrorCode.UNKNOWN_PRODUCER_ID
    p.produce(9, 0, 0)


def test_expired_producer_is_unknown() -> None:
    p = Partition()
    p.produce(7, 0, 0, 2)
    p.now += EXPIRY - 1
    assert p.mgr.remove_expired_producers(p.now) == []
    p.now += 1
    assert p.mgr.remove_expired_producers(p.now) == [7]
    assert p.error(p.batch(7, 0, 2)) is ErrorCode.UNKNOWN_PRODUCER_ID
    p.produce(7, 0, 0)


def test_a_replay_across_an_expiry_ends_where_the_leader_did() -> None:
    """The leader forgot producer 7 (expired) and took its next sequence-0 batch as a new
    producer's first; a follower or a rebuild that never ran that sweep replays both batches
    and must end with the same entry - nothing from before the restart, coordinator epoch
    included - so a retry of the old batch is not taken for a duplicate of it."""
    p = Partition()
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, commit=True, coordinator_epoch=3)
    p.now += EXPIRY
    assert p.mgr.remove_expired_producers(p.now) == [7]
    p.produce(7, 0, 0)
    replayed = ProducerStateManager(producer_id_expiration_ms=EXPIRY)
    replayed.replay(p.written)
    assert replayed.export_snapshot() == p.mgr.export_snapshot()


def test_idle_producer_keeps_its_state_until_the_sweep_runs() -> None:
    p = Partition()
    p.produce(7, 0, 0, 2)
    p.now += 3 * EXPIRY  # longer than the expiration, but no sweep ran: Kafka keeps the entry
    p.produce(7, 0, 2)
    assert p.error(p.batch(7, 0, 0, 1)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.mgr.remove_expired_producers(p.now + EXPIRY - 1) == []


@pytest.mark.parametrize("create_time", [9_999_999, 0, -1])
def test_record_timestamps_never_expire_a_producer(create_time: int) -> None:
    """A producer whose records carry CreateTime 1970 (kafka-python's suite sends 9999999)
    keeps its state: expiration goes by the broker's clock, not by record timestamps."""
    mgr = ProducerStateManager(producer_id_expiration_ms=EXPIRY)
    broker_now = 1_700_000_000_000
    for seq in (0, 1, 2, 3):
        stamp = create_time if seq % 2 == 0 else broker_now  # 1970, then the client's clock
        batch = ProducerBatch(producer_id=7, producer_epoch=0, base_sequence=seq,
                              last_offset_delta=0, base_offset=seq, max_timestamp=stamp)
        assert mgr.check_and_update(batch, broker_now).duplicate is None
        broker_now += 10
    assert mgr.remove_expired_producers(broker_now) == []
    assert mgr.remove_expired_producers(broker_now + EXPIRY) == [7]


def test_rebuilt_state_expires_from_the_batch_timestamps() -> None:
    """A snapshot keeps Kafka's format (no broker clock): a rebuilt entry counts from its last
    batch timestamp."""
    p = Partition()
    p.produce(7, 0, 0)
    rebuilt = ProducerStateManager.from_snapshot(
        decode_snapshot(encode_snapshot(p.mgr.export_snapshot())), producer_id_expiration_ms=EXPIRY
    )
    assert rebuilt.remove_expired_producers(p.now + EXPIRY - 1) == []
    assert rebuilt.remove_expired_producers(p.now + EXPIRY) == [7]


def test_producer_with_open_transaction_never_expires() -> None:
    p = Partition()
    p.produce(7, 0, 0, txn=True)
    p.now += 10 * EXPIRY
    assert p.mgr.remove_expired_producers(p.now) == []
    p.marker(7, 0, commit=True)
    assert p.mgr.remove_expired_producers(p.now + EXPIRY) == [7]


def test_sequence_wraps_from_int32_max_to_zero() -> None:
    p = Partition()
    p.produce(7, 0, 0)
    # trusted replication may start anywhere: put the producer near the end of the range
    p.append(p.batch(7, 0, INT32_MAX - 1, 2), AppendOrigin.REPLICATION)
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.last_seq == INT32_MAX
    p.produce(7, 0, 0, 3)
    assert p.error(p.batch(7, 0, 4)) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a batch straddling the wrap, then its retry
    p.append(p.batch(7, 1, 0), AppendOrigin.REPLICATION)
    p.append(p.batch(7, 1, INT32_MAX - 1, 4), AppendOrigin.REPLICATION)
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.last_seq == 1
    dup = p.produce(7, 1, INT32_MAX - 1, 4).duplicate
    assert dup is not None
    assert dup.last_seq == 1
    p.produce(7, 1, 2)


def test_transactional_batch_opens_transaction_and_holds_lso() -> None:
    p = Partition()
    p.produce(1, 0, 0, 2)
    p.produce(7, 0, 0, 3, txn=True)
    p.produce(7, 0, 3, 1, txn=True)
    assert p.mgr.ongoing_transactions() == {7: 2}
    assert p.mgr.last_stable_offset(high_watermark=p.leo) == 2
    assert p.mgr.last_stable_offset(high_watermark=1) == 1
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.current_txn_first_offset == 2


def test_non_transactional_batch_inside_transaction_is_invalid_txn_state() -> None:
    p = Partition()
    p.produce(7, 0, 0, txn=True)
    assert p.error(p.batch(7, 0, 1)) is ErrorCode.INVALID_TXN_STATE


def test_commit_marker_completes_transaction_without_index_entry() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3, txn=True)
    result = p.marker(7, 0, commit=True)
    assert [
        (t.producer_id, t.first_offset, t.last_offset, t.is_aborted) for t in result.completed
    ] == [(7, 0, 3, False)]
    assert result.aborted == ()
    assert p.mgr.ongoing_transactions() == {}
    p.mgr.on_high_watermark_updated(p.leo)
    assert p.mgr.last_stable_offset(p.leo) == p.leo


def test_abort_marker_yields_index_entry_with_lso() -> None:
    p = Partition()
    p.produce(7, 0, 0, 2, txn=True)  # offsets 0-1
    p.produce(8, 0, 0, 2, txn=True)  # offsets 2-3, still open after 7 aborts
    result = p.marker(7, 0, commit=False)  # offset 4
    assert result.aborted == (AbortedTxn(7, 0, 4, 2),)
    result = p.marker(8, 0, commit=False)  # offset 5
    assert result.aborted == (AbortedTxn(8, 2, 5, 6),)


def test_marker_without_open_transaction_completes_empty_range() -> None:
    p = Partition()
    result = p.marker(7, 0, commit=False)
    assert result.aborted == (AbortedTxn(7, 0, 0, 1),)


def test_lso_waits_for_marker_replication() -> None:
    p = Partition()
    p.produce(7, 0, 0, 2, txn=True)
    p.marker(7, 0, commit=True)  # marker at offset 2
    assert p.mgr.last_stable_offset(high_watermark=3) == 0
    p.mgr.on_high_watermark_updated(2)
    assert p.mgr.last_stable_offset(high_watermark=3) == 0
    p.mgr.on_high_watermark_updated(3)
    assert p.mgr.last_stable_offset(high_watermark=3) == 3


def test_marker_with_older_epoch_is_rejected() -> None:
    p = Partition()
    p.produce(7, 2, 0, txn=True)
    stale = ProducerBatch(
        producer_id=7,
        producer_epoch=1,
        base_sequence=-1,
        last_offset_delta=0,
        base_offset=p.leo,
        is_transactional=True,
        control=ControlType.ABORT,
    )
    assert p.error(stale, AppendOrigin.COORDINATOR) is ErrorCode.INVALID_PRODUCER_EPOCH


def test_marker_from_older_coordinator_epoch_is_fenced() -> None:
    p = Partition()
    p.produce(7, 0, 0, txn=True)
    p.marker(7, 0, commit=True, coordinator_epoch=5)
    p.produce(7, 0, 1, txn=True)
    stale = ProducerBatch(
        producer_id=7,
        producer_epoch=0,
        base_sequence=-1,
        last_offset_delta=0,
        base_offset=p.leo,
        is_transactional=True,
        control=ControlType.COMMIT,
        coordinator_epoch=4,
    )
    assert p.error(stale, AppendOrigin.COORDINATOR) is ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_clients_cannot_write_control_batches() -> None:
    p = Partition()
    batch = ProducerBatch(
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        last_offset_delta=0,
        base_offset=0,
        is_transactional=True,
        control=ControlType.COMMIT,
    )
    assert p.error(batch) is ErrorCode.INVALID_RECORD


def test_control_batch_must_be_transactional() -> None:
    p = Partition()
    batch = ProducerBatch(
        producer_id=7,
        producer_epoch=0,
        base_sequence=-1,
        last_offset_delta=0,
        base_offset=0,
        control=ControlType.COMMIT,
    )
    assert p.error(batch, AppendOrigin.COORDINATOR) is ErrorCode.INVALID_RECORD


def test_transactional_batch_needs_a_producer_id() -> None:
    p = Partition()
    assert p.error(p.batch(-1, -1, -1, txn=True)) is ErrorCode.INVALID_RECORD


def test_v2_marker_with_bumped_epoch_fences_a_delayed_write() -> None:
    """KIP-890: the commit marker carries epoch+1, so a late retry of the finished transaction
    (epoch 0) is refused instead of opening a hanging transaction."""
    p = Partition()
    p.produce(7, 0, 0, 2, txn=True)
    p.marker(7, 1, commit=True)
    assert p.error(p.batch(7, 0, 2, txn=True)) is ErrorCode.INVALID_PRODUCER_EPOCH
    assert p.mgr.ongoing_transactions() == {}
    p.produce(7, 1, 0, txn=True)  # the next transaction starts at sequence 0
    assert p.mgr.ongoing_transactions() == {7: 3}


def test_multi_batch_append_validates_against_staged_state() -> None:
    p = Partition()
    b1 = p.batch(7, 0, 0, 2)
    b2 = ProducerBatch(
        producer_id=7,
        producer_epoch=0,
        base_sequence=2,
        last_offset_delta=0,
        base_offset=2,
        max_timestamp=p.now,
    )
    pending = p.mgr.validate_append([b1, b2], p.now)
    assert isinstance(pending, PendingAppend)
    assert p.mgr.entry(7) is None, "nothing changes before complete_append"
    p.mgr.complete_append(pending)
    entry = p.mgr.entry(7)
    assert entry is not None
    assert entry.last_seq == 2
    assert p.mgr.last_map_offset == 3


def test_multi_batch_append_with_a_bad_batch_changes_nothing() -> None:
    p = Partition()
    p.produce(7, 0, 0)
    before = p.mgr.export_snapshot()
    good = p.batch(7, 0, 1)
    bad = ProducerBatch(
        producer_id=7,
        producer_epoch=0,
        base_sequence=5,
        last_offset_delta=0,
        base_offset=2,
    )
    with pytest.raises(ProducerStateError) as info:
        p.mgr.validate_append([good, bad], p.now)
    assert info.value.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert p.mgr.export_snapshot() == before


def test_stale_pending_append_is_refused() -> None:
    p = Partition()
    pending = p.mgr.validate_append([p.batch(7, 0, 0)], p.now)
    assert isinstance(pending, PendingAppend)
    p.produce(8, 0, 0)
    with pytest.raises(RuntimeError):
        p.mgr.complete_append(pending)


def test_retention_keeps_producer_state() -> None:
    p = Partition()
    p.produce(7, 0, 0, 3)
    p.mgr.truncate_head(100)
    assert p.mgr.last_map_offset == 100
    p.leo = 100
    dup = p.produce(7, 0, 0, 3).duplicate
    assert dup is not None
    assert dup.first_offset == 0
    p.produce(7, 0, 3)


def test_describe_producers() -> None:
    p = Partition()
    p.produce(9, 1, 0, 3)
    p.produce(7, 0, 0, txn=True)
    rows = p.mgr.describe_producers()
    assert [
        (r.producer_id, r.producer_epoch, r.last_sequence, r.current_txn_start_offset) for r in rows
    ] == [(7, 0, 0, 3), (9, 1, 2, -1)]


def _busy_partition() -> Partition:
    p = Partition()
    p.produce(1, 0, 0, 3)
    p.produce(2, 4, 0, 2, txn=True)
    p.produce(3, 0, 0, 1, txn=True)
    p.marker(3, 0, commit=False, coordinator_epoch=2)
    for seq in range(3, 10):
        p.produce(1, 0, seq)
    return p


def test_snapshot_round_trip() -> None:
    p = _busy_partition()
    snap = p.mgr.export_snapshot()
    data = encode_snapshot(snap)
    assert decode_snapshot(data) == snap
    restored = ProducerStateManager.from_snapshot(decode_snapshot(data))
    assert restored.export_snapshot() == snap
    assert restored.ongoing_transactions() == p.mgr.ongoing_transactions()
    assert restored.last_stable_offset(p.leo) == p.mgr.last_stable_offset(p.leo)


def test_rebuild_from_snapshot_plus_replay_equals_live_state() -> None:
    p = Partition()
    p.produce(1, 0, 0, 3)
    p.produce(2, 0, 0, 2, txn=True)
    snap = encode_snapshot(p.mgr.export_snapshot())
    p.produce(1, 0, 3)
    p.marker(2, 0, commit=False)
    p.produce(2, 1, 0, txn=True)
    p.produce(3, 0, 0)
    rebuilt = ProducerStateManager.from_snapshot(decode_snapshot(snap))
    # the whole log may be replayed: batches the snapshot covers are skipped
    rebuilt.replay(p.written)
    assert rebuilt.export_snapshot() == p.mgr.export_snapshot()
    from_scratch = ProducerStateManager()
    from_scratch.replay(p.written)
    assert from_scratch.export_snapshot() == p.mgr.export_snapshot()


def test_rebuilt_state_still_detects_duplicates() -> None:
    p = _busy_partition()
    restored = ProducerStateManager.from_snapshot(
        decode_snapshot(encode_snapshot(p.mgr.export_snapshot()))
    )
    retry = ProducerBatch(
        producer_id=1, producer_epoch=0, base_sequence=9, last_offset_delta=0, base_offset=p.leo
    )
    dup = restored.check_and_update(retry, p.now).duplicate
    assert dup is not None
    assert dup.first_offset == p.leo - 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b[:5], "shorter than its header"),
        (lambda b: b"XXXX" + b[4:], "magic"),
        (lambda b: b[:4] + b"\x00\x02" + b[6:], "version 2"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC"),
        (lambda b: b[:-3], "CRC"),
        (lambda b: b + b"\x00", "CRC"),
    ],
)
def test_corrupt_snapshot_is_one_clear_error(mutate: object, message: str) -> None:
    data = encode_snapshot(_busy_partition().mgr.export_snapshot())
    assert callable(mutate)
    with pytest.raises(CorruptSnapshotError, match=message) as info:
        decode_snapshot(mutate(data))
    assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE


# ---------------------------------------------------------------- snapshot bytes, fuzzed

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
batch_metadata = st.builds(BatchMetadata, I32, I32, I64, I64, I64)
entries = st.builds(
    ProducerStateEntry,
    producer_id=st.integers(0, 2**63 - 1),
    producer_epoch=st.integers(-(2**15), 2**15 - 1),
    batches=st.lists(batch_metadata, max_size=5),
    coordinator_epoch=I32,
    last_timestamp=I64,
    current_txn_first_offset=st.none() | st.integers(0, 2**63 - 1),
)
snapshots = st.builds(
    ProducerSnapshot,
    last_map_offset=I64,
    entries=st.lists(entries, max_size=6, unique_by=lambda e: e.producer_id).map(tuple),
    unreplicated=st.lists(st.builds(CompletedTxn, I64, I64, I64, st.booleans()), max_size=4).map(
        tuple
    ),
)


@given(snapshots)
@settings(max_examples=150, deadline=None)
def test_any_snapshot_round_trips(snap: ProducerSnapshot) -> None:
    assert decode_snapshot(encode_snapshot(snap)) == snap


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_garbage_snapshot_raises_only_corrupt_snapshot_error(data: bytes) -> None:
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(data)


@given(snapshots, st.data())
@settings(max_examples=150, deadline=None)
def test_any_flipped_bit_is_detected(snap: ProducerSnapshot, data: st.DataObject) -> None:
    raw = bytearray(encode_snapshot(snap))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(raw))


# ---------------------------------------------------------------- from real batch headers


def test_producer_batch_from_wire_headers() -> None:
    """The server builds inputs from `protocol.records` headers; data and marker batches."""
    data = build_batch(
        [Record(0, 0, None, b"a", []), Record(1, 0, None, b"b", [])],
        base_timestamp=5_000,
        producer_id=7,
        producer_epoch=2,
        base_sequence=0,
        is_transactional=True,
    )
    batch = ProducerBatch.from_header(parse_batch_header(data), base_offset=40)
    assert batch == ProducerBatch(
        producer_id=7,
        producer_epoch=2,
        base_sequence=0,
        last_offset_delta=1,
        base_offset=40,
        max_timestamp=5_000,
        is_transactional=True,
    )
    marker = build_control_batch(
        False,
        producer_id=7,
        producer_epoch=2,
        coordinator_epoch=3,
        base_offset=42,
        timestamp_ms=6_000,
    )
    header = parse_batch_header(marker)
    [record] = decode_records(marker, 0, header)
    commit, coordinator_epoch = parse_control_record(record)
    control = ControlType.COMMIT if commit else ControlType.ABORT
    mgr = ProducerStateManager()
    mgr.check_and_update(batch, 5_000)
    result = mgr.check_and_update(
        ProducerBatch.from_header(header, control=control, coordinator_epoch=coordinator_epoch),
        6_000,
        AppendOrigin.COORDINATOR,
    )
    assert result.aborted == (AbortedTxn(7, 40, 42, 43),)
    with pytest.raises(ValueError, match="control"):
        ProducerBatch.from_header(header)
