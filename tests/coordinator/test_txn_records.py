"""`__transaction_state` record layouts and the producer-id block allocator.

Records are bytes read back at start, so: every value round-trips, and any other input (garbage,
truncation, trailing bytes, a future version) raises `TxnRecordError`, never anything else.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.txn import (
    ProducerIdBlockAllocator,
    TopicPartition,
    TransactionMetadata,
    TxnRecordError,
    TxnState,
)
from kafkapy.coordinator.txn.records import (
    ProducerIdBlock,
    RecordKeyType,
    decode_key,
    decode_metadata_value,
    decode_producer_id_block_value,
    encode_metadata_key,
    encode_metadata_value,
    encode_producer_id_block_key,
    encode_producer_id_block_value,
)
from kafkapy.protocol.errors import ErrorCode

I64 = st.integers(-(2**63), 2**63 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
NAMES = st.text(max_size=30)

metadata = st.builds(
    TransactionMetadata,
    transactional_id=NAMES,
    producer_id=I64,
    producer_epoch=I16,
    last_producer_id=I64,
    last_producer_epoch=I16,
    next_producer_id=I64,
    txn_timeout_ms=I32,
    state=st.sampled_from(TxnState),
    partitions=st.frozensets(st.builds(TopicPartition, NAMES, I32), max_size=8),
    txn_start_timestamp=I64,
    txn_last_update_timestamp=I64,
    transaction_version=st.integers(0, 127),
)


@given(metadata)
@settings(max_examples=200, deadline=None)
def test_metadata_round_trip(md: TransactionMetadata) -> None:
    key = encode_metadata_key(md.transactional_id)
    assert decode_key(key) == (RecordKeyType.TRANSACTION_METADATA, md.transactional_id)
    value = encode_metadata_value(md)
    assert decode_metadata_value(md.transactional_id, value) == md


@given(metadata)
@settings(max_examples=100, deadline=None)
def test_equal_state_encodes_to_equal_bytes(md: TransactionMetadata) -> None:
    shuffled = TransactionMetadata(
        **{f: getattr(md, f) for f in md.__dataclass_fields__ if f != "partitions"},
        partitions=frozenset(sorted(md.partitions, reverse=True)),
    )
    assert encode_metadata_value(shuffled) == encode_metadata_value(md)


@given(st.integers(1, 2**62), st.integers(1, 2**31 - 1))
@settings(deadline=None)
def test_producer_id_block_round_trip(extra: int, size: int) -> None:
    block = ProducerIdBlock(size + extra, size)
    assert decode_key(encode_producer_id_block_key()) == (RecordKeyType.PRODUCER_ID_BLOCK, None)
    assert decode_producer_id_block_value(encode_producer_id_block_value(block)) == block


def _decode_any(data: bytes) -> list[ErrorCode]:
    """Run every decoder; collect the error codes of the refusals (other exceptions escape)."""
    codes = []
    for fn in (decode_key, decode_producer_id_block_value, lambda d: decode_metadata_value("t", d)):
        try:
            fn(data)
        except TxnRecordError as exc:
            codes.append(exc.error_code)
    return codes


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_garbage_raises_only_txn_record_error(data: bytes) -> None:
    assert set(_decode_any(data)) <= {ErrorCode.CORRUPT_MESSAGE}


@given(metadata, st.data())
@settings(max_examples=100, deadline=None)
def test_truncated_or_extended_value_is_refused(
    md: TransactionMetadata, data: st.DataObject
) -> None:
    value = encode_metadata_value(md)
    cut = data.draw(st.integers(0, len(value) - 1))
    with pytest.raises(TxnRecordError):
        decode_metadata_value(md.transactional_id, value[:cut])
    with pytest.raises(TxnRecordError, match="trailing"):
        decode_metadata_value(md.transactional_id, value + b"\x00")


def test_unknown_versions_and_types_are_refused_by_name() -> None:
    with pytest.raises(TxnRecordError, match="key type 7"):
        decode_key(b"\x00\x07")
    with pytest.raises(TxnRecordError, match="version 1"):
        decode_metadata_value("t", b"\x00\x01" + bytes(60))
    with pytest.raises(TxnRecordError, match="version 3"):
        decode_producer_id_block_value(b"\x00\x03" + bytes(12))
    md = TransactionMetadata(
        transactional_id="t",
        producer_id=1,
        producer_epoch=0,
        txn_timeout_ms=1,
        state=TxnState.EMPTY,
        txn_last_update_timestamp=0,
    )
    value = bytearray(encode_metadata_value(md))
    value[2 + 8 + 8 + 8 + 2 + 2 + 4] = 99  # the state code
    with pytest.raises(TxnRecordError, match="state code 99"):
        decode_metadata_value("t", bytes(value))
    with pytest.raises(TxnRecordError, match="UTF-8"):
        decode_key(b"\x00\x00\x00\x02\xff\xfe")
    with pytest.raises(TxnRecordError, match="bad producer-id block"):
        decode_producer_id_block_value(encode_producer_id_block_value(ProducerIdBlock(5, 10)))


# ---------------------------------------------------------------- allocator


def test_allocator_reserves_a_block_before_handing_out_its_first_id() -> None:
    alloc = ProducerIdBlockAllocator(block_size=2)
    pid, first_block = alloc.allocate()
    assert (pid, first_block) == (0, ProducerIdBlock(2, 2))
    assert first_block is not None
    alloc.replay(first_block)
    assert alloc.allocate() == (1, None)
    pid, block = alloc.allocate()
    assert (pid, block) == (2, ProducerIdBlock(4, 2))


def test_allocator_after_a_failed_block_write_reissues_the_unseen_id() -> None:
    alloc = ProducerIdBlockAllocator(block_size=2)
    first = alloc.allocate()  # the write of this block fails: never replayed
    assert alloc.allocate() == first


def test_allocator_never_reuses_a_loaded_block() -> None:
    alloc = ProducerIdBlockAllocator(block_size=10)
    alloc.replay(ProducerIdBlock(30, 10))
    alloc.finish_loading()
    pid, block = alloc.allocate()
    assert (pid, block) == (30, ProducerIdBlock(40, 10))


@given(
    st.lists(st.sampled_from(["alloc", "restart", "lose_write"]), max_size=60), st.integers(1, 5)
)
@settings(max_examples=100, deadline=None)
def test_allocated_ids_are_unique_across_restarts(ops: list[str], size: int) -> None:
    log: list[ProducerIdBlock] = []
    alloc = ProducerIdBlockAllocator(size)
    handed_out: list[int] = []
    for op in ops:
        if op == "restart":
            alloc = ProducerIdBlockAllocator(size)
            for persisted in log:
                alloc.replay(persisted)
            alloc.finish_loading()
            continue
        pid, block = alloc.allocate()
        if block is not None:
            if op == "lose_write":
                continue  # the client got an error, not the id
            log.append(block)
            alloc.replay(block)
        handed_out.append(pid)
    assert len(handed_out) == len(set(handed_out))
    if log:
        assert max(handed_out) < log[-1].next_block_start
