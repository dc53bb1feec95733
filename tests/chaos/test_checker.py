"""The checker over hand-made histories: each anomaly kind is found, a clean history has none."""

from __future__ import annotations

import pytest

from kafkapy.chaos.checker import (
    check,
    check_group,
    check_producer,
    check_txn,
    fault_unavailability,
)
from kafkapy.chaos.history import (
    ACKS1,
    GROUP_CONSUMERS,
    GROUP_TXN,
    IDEMPOTENT,
    TOPIC_ACKS1,
    TOPIC_IDEMPOTENT,
    TOPIC_TXN_OUT,
    Ack,
    Commit,
    FaultRecord,
    History,
    Processed,
    Resume,
    Send,
    TxnOutcome,
)


def produced(values: list[int], workload: str = IDEMPOTENT, partitions: int = 1) -> History:
    """A history where `values` were sent and acknowledged in order (value v at offset v of
    partition 0 when partitions == 1), at times 0.1 * v."""
    h = History(partitions=partitions)
    for v in values:
        h.add(Send(workload, v, v % partitions, v * 0.1))
        h.add(Ack(workload, v, v % partitions, v * 0.1 + 0.01, offset=v // partitions))
    return h


def log_of(values: list[int]) -> list[tuple[int, bytes]]:
    return [(offset, str(v).encode()) for offset, v in enumerate(values)]


def test_clean_history_has_no_anomaly() -> None:
    h = produced([0, 1, 2, 3])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 2, 3])})
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0"), (1, b"1:1"), (2, b"2:2"), (3, b"2:3")]})
    h.add(TxnOutcome(1, "committed", (0, 1), 1.0))
    h.add(TxnOutcome(2, "committed", (2, 3), 2.0))
    h.group_committed = {GROUP_TXN: {0: 4}, GROUP_CONSUMERS: {0: 4}}
    for offset in range(4):
        h.add(Processed("a", 0, offset, offset))
    h.add(Resume("a", 0, 0, 0.5))
    h.add(Commit("a", 0, 2, 1.0))
    h.add(Commit("a", 0, 4, 2.0))
    result = check(h, horizon=5.0)
    assert result.total_anomalies() == 0, result.anomalies()
    assert result.idempotent.acked == 4
    assert result.txn.committed == 2


def test_lost_acknowledged_value() -> None:
    h = produced([0, 1, 2, 3])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 3])})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert result.lost == [2]
    assert check(h, 5.0).anomalies()["lost"] == 1


def test_unacknowledged_value_missing_is_not_lost() -> None:
    h = produced([0, 1])
    h.add(Send(IDEMPOTENT, 2, 0, 0.2))
    h.add(Ack(IDEMPOTENT, 2, 0, 0.3, error="Local: Message timed out"))
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1])})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert result.lost == []
    assert result.failed == 1


def test_duplicated_value() -> None:
    h = produced([0, 1, 2])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 1, 2])})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert result.duplicated == [1]
    assert result.reordered == []


def test_reordered_values() -> None:
    h = produced([0, 1, 2, 3])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 2, 1, 3])})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert result.reordered == [1]


def test_acknowledged_offset_rewritten_is_inconsistent() -> None:
    h = produced([0, 1, 2])
    h.set_read(TOPIC_IDEMPOTENT, {0: [(0, b"0"), (1, b"2"), (2, b"1")]})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert len(result.inconsistent) == 2
    assert "value 1 acked at 0@1" in result.inconsistent[0]


def test_an_acknowledgement_without_an_offset_is_checked_for_loss_only() -> None:
    """librdkafka's idempotent producer reports a batch whose answer it never got as written,
    without an offset, once a later batch is acknowledged (a chaos run, seed 7: values
    237-246 acked that way and read at offsets 79-82). No offset is not offset 0: nothing to
    compare, but the value must still be in the log."""
    h = History(partitions=1)
    for v in range(4):
        h.add(Send(IDEMPOTENT, v, 0, v * 0.1))
        h.add(Ack(IDEMPOTENT, v, 0, 1.0, offset=v if v in (0, 3) else -1))
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 2, 3])})
    result = check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT)
    assert (result.inconsistent, result.lost) == ([], [])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 2, 3])})
    assert check_producer(h, IDEMPOTENT, TOPIC_IDEMPOTENT).lost == [1]


def test_acks1_losses_are_not_anomalies() -> None:
    h = produced([0, 1, 2], workload=ACKS1)
    h.set_read(TOPIC_ACKS1, {0: log_of([0])})
    result = check(h, 5.0)
    assert result.acks1.lost == [1, 2]
    assert result.total_anomalies() == 0


def test_aborted_read() -> None:
    h = History()
    h.add(TxnOutcome(1, "committed", (0,), 1.0))
    h.add(TxnOutcome(2, "aborted", (1,), 2.0))
    h.add(TxnOutcome(3, "committed", (1,), 3.0))
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0"), (2, b"2:1"), (4, b"3:1")]})
    result = check_txn(h)
    assert result.aborted_reads == ["0@2 value 1 of aborted txn 2"]
    assert result.duplicated == []
    assert check(h, 5.0).anomalies()["aborted_read"] == 1


def test_unknown_transaction_seen_is_not_an_aborted_read() -> None:
    h = History()
    h.add(TxnOutcome(1, "unknown", (0,), 1.0))
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0")]})
    assert check(h, 5.0).total_anomalies() == 0


def test_value_of_two_committed_transactions_is_duplicated() -> None:
    h = History()
    h.add(TxnOutcome(1, "committed", (0, 1), 1.0))
    h.add(TxnOutcome(2, "committed", (1, 2), 2.0))
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0"), (1, b"1:1"), (3, b"2:1"), (4, b"2:2")]})
    assert check_txn(h).duplicated == [1]


def test_committed_transaction_or_input_below_committed_offset_missing_is_lost() -> None:
    h = produced([0, 1, 2, 3])
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 2, 3])})
    h.add(TxnOutcome(1, "committed", (0, 1), 1.0))
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0")]})
    h.group_committed[GROUP_TXN] = {0: 3}
    assert check_txn(h).lost == [1, 2]


def test_group_resuming_below_an_acknowledged_commit_goes_backwards() -> None:
    h = History()
    h.add(Commit("a", 0, 10, 1.0))
    h.add(Resume("b", 0, 7, 2.0))
    backwards = check_group(h).backwards
    assert len(backwards) == 1
    assert "b resumed at 7" in backwards[0]
    assert "a committed 10" in backwards[0]


def test_group_resuming_below_a_commit_acknowledged_later_is_fine() -> None:
    h = History()
    h.add(Resume("b", 0, 7, 2.0))
    h.add(Commit("a", 0, 10, 2.5))
    assert check_group(h).backwards == []


def test_group_commits_going_down_go_backwards() -> None:
    h = History()
    h.add(Commit("a", 0, 10, 1.0))
    h.add(Commit("b", 0, 8, 2.0))
    h.add(Commit("b", 1, 3, 2.0))
    backwards = check_group(h).backwards
    assert len(backwards) == 1
    assert "b committed 8" in backwards[0]


def test_group_skipped_record_is_lost_and_divergent_read_inconsistent() -> None:
    h = History()
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 2, 3])})
    h.group_committed[GROUP_CONSUMERS] = {0: 3}
    h.add(Processed("a", 0, 0, 0))
    h.add(Processed("a", 0, 2, 99))
    result = check_group(h)
    assert result.lost == ["0@1 value 1 below committed 3, never processed"]
    assert result.inconsistent == ["a processed 0@2 = 99, log has 2"]


def test_unreadable_partition_is_an_anomaly() -> None:
    h = History()
    h.read_errors.append("chaos-txn-out[1] (read_committed): read up to 5 of high watermark 9")
    assert check(h, 1.0).anomalies()["unreadable"] == 1


def test_unavailability_is_the_longest_stretch_without_acks_on_the_faults_partitions() -> None:
    h = History(partitions=2)
    # partition 0: acks every 0.1 s except 3.0-6.0; partition 1: never interrupted
    for i in range(100):
        t = i * 0.1
        if not 3.0 <= t < 6.0:
            h.add(Ack(IDEMPOTENT, 2 * i, 0, t, offset=i))
        h.add(Ack(IDEMPOTENT, 2 * i + 1, 1, t, offset=i))
    h.faults.append(FaultRecord(0, "kill", [1], [0], injected_at=2.95))
    h.faults.append(FaultRecord(1, "pause", [2], [1], injected_at=7.0))
    h.faults.append(FaultRecord(2, "partition", [3], [], injected_at=8.0, skipped="no iptables"))
    got = fault_unavailability(h, horizon=10.0)
    assert got[0] == pytest.approx(3.05)
    assert got[1] == pytest.approx(0.1, abs=0.01)
    assert 2 not in got
    rows = {r.kind: r for r in check(h, 10.0).rows}
    assert rows["kill"].faults == 1
    assert rows["kill"].max_s == pytest.approx(3.05)
    assert "partition" not in rows


def test_fault_without_any_ack_counts_its_whole_window() -> None:
    h = History(partitions=1)
    h.faults.append(FaultRecord(0, "two-down", [1, 2], [0], injected_at=1.0))
    assert fault_unavailability(h, horizon=4.0) == {0: 3.0}


def test_rows_attribute_values_to_the_fault_in_effect_when_sent() -> None:
    h = produced(list(range(10)))
    h.set_read(TOPIC_IDEMPOTENT, {0: log_of([0, 1, 2, 3, 4, 5, 7, 8, 9])})
    h.faults.append(FaultRecord(0, "kill", [1], [0], injected_at=0.45))
    rows = {r.kind: r for r in check(h, 2.0).rows}
    assert rows["none"].acked == 5
    assert rows["kill"].acked == 5
    assert rows["kill"].lost == 1


def test_liveness_figures_are_the_longest_stretch_without_progress() -> None:
    h = History()
    h.add(TxnOutcome(1, "committed", (0,), 2.0))
    h.add(TxnOutcome(2, "aborted", (1,), 3.0))
    h.add(TxnOutcome(3, "committed", (1,), 9.0))
    h.add(Commit("a", 0, 1, 1.0))
    h.add(Commit("a", 0, 2, 3.5))
    h.add(Processed("a", 0, 0, 0))
    h.add(Processed("b", 0, 0, 0))
    h.set_read(TOPIC_TXN_OUT, {0: [(0, b"1:0"), (2, b"3:1")]})
    result = check(h, horizon=10.0)
    assert result.txn.stall_s == pytest.approx(7.0)
    assert result.txn.processed == 2
    assert result.group.stall_s == pytest.approx(6.5)
    assert result.group.distinct == 1
    assert result.total_anomalies() == 0


def test_transactional_rewind_below_an_acknowledged_commit_goes_backwards() -> None:
    """The seed-1 long run's shape: a transaction carrying offset 6475 for partition 0 was
    acknowledged, later the processor rewound to 6474 (the committed offset was lost) and
    wrote those values again."""
    h = History()
    h.add(Commit("txn", 0, 6475, 400.0, group=GROUP_TXN))
    h.add(Resume("txn", 0, 6475, 402.0, group=GROUP_TXN))
    h.add(Resume("txn", 0, 6474, 436.8, group=GROUP_TXN))
    h.add(Commit("group-a", 0, 10, 1.0))
    backwards = check_group(h).backwards
    assert backwards == ["chaos-txn partition 0: txn resumed at 6474 at 436.800s after txn committed 6475"]
    result = check(h, horizon=500.0)
    assert result.anomalies()["offsets_backwards"] == 1
    assert result.group.commits == 1, "the processor's commits are not the group's"
