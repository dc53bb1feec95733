"""TxnOffsetCommit: transactional offsets wait for the transaction's marker."""

from __future__ import annotations

from kafkapy.coordinator.group import OffsetToCommit, TopicPartition
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness

TP = TopicPartition("t", 0)


def txn_commit(h: Harness, pid: int, offset: int, **kw: object) -> list[ErrorCode]:
    args: dict[str, object] = {
        "group_id": "g", "producer_id": pid, "producer_epoch": 0, "member_id": "",
        "group_instance_id": None, "generation_id": -1,
    } | kw
    result = h.coordinator.commit_transactional_offsets(
        offsets=[OffsetToCommit("t", 0, offset)], now_ms=h.now_ms, **args  # type: ignore[arg-type]
    )
    h.take(result)  # type: ignore[arg-type]
    return [e for _, e in result.response]  # type: ignore[union-attr]


def fetch(h: Harness, require_stable: bool) -> tuple[int, ErrorCode]:
    result = h.coordinator.fetch_offsets(group_id="g", partitions=[TP], require_stable=require_stable)
    [p] = result.response.partitions  # type: ignore[union-attr]
    return p.offset, p.error


def test_offsets_count_only_after_commit_marker() -> None:
    h = Harness()
    assert txn_commit(h, 7, 42) == [ErrorCode.NONE]
    assert all(r.producer_id == 7 for r in h.records)
    assert fetch(h, False) == (-1, ErrorCode.NONE)
    assert fetch(h, True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    h.coordinator.replay_transaction_marker(7, commit=True)
    assert fetch(h, True) == (42, ErrorCode.NONE)


def test_aborted_transaction_offsets_are_dropped() -> None:
    h = Harness()
    txn_commit(h, 8, 5)
    h.coordinator.replay_transaction_marker(8, commit=False)
    assert fetch(h, True) == (-1, ErrorCode.NONE)
    h.coordinator.replay_transaction_marker(8, commit=True)  # a stray marker changes nothing
    assert fetch(h, False) == (-1, ErrorCode.NONE)


def test_replay_with_markers_reproduces_offsets() -> None:
    h = Harness()
    txn_commit(h, 1, 10)
    txn_commit(h, 2, 20)
    fresh = h.replayed()
    assert fresh.has_pending_transactional_offset("g", TP)
    fresh.replay_transaction_marker(2, commit=True)
    fresh.replay_transaction_marker(1, commit=False)
    assert fresh.offsets["g"][TP].offset == 20


def test_txn_commit_member_checks() -> None:
    h = Harness()
    _, first = h.join()
    assert first is not None
    rid, _ = h.join(member_id=first.member_id)
    assert txn_commit(h, 3, 1, member_id="stranger", generation_id=1) == [
        ErrorCode.UNKNOWN_MEMBER_ID]
    assert txn_commit(h, 3, 1, member_id=first.member_id, generation_id=9) == [
        ErrorCode.ILLEGAL_GENERATION]
    assert txn_commit(h, 3, 1, member_id=first.member_id, generation_id=1) == [ErrorCode.NONE]
    assert txn_commit(h, 3, 1) == [ErrorCode.NONE]  # pre-v3 clients send no member
    assert txn_commit(h, 3, 1, group_id="") == [ErrorCode.INVALID_GROUP_ID]
    del rid
