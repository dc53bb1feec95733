"""Table tests of the pure HW / ISR rules (kafkapy.replication.isr)."""

from __future__ import annotations

import pytest

from kafkapy.replication.isr import (
    IsrChange,
    ReplicaProgress,
    high_watermark,
    in_sync,
    isr_change,
    record_fetch,
)

LAG = 10_000


def _p(leo: int, caught_up: int = 0) -> ReplicaProgress:
    return ReplicaProgress(log_end_offset=leo, last_caught_up_ms=caught_up)


@pytest.mark.parametrize(
    ("current", "leader_leo", "isr", "leos", "expected"),
    [
        (0, 10, [1], {}, 10),  # the leader alone: its LEO
        (0, 10, [1, 2, 3], {2: 7, 3: 9}, 7),  # min over the ISR
        (0, 10, [1, 2], {2: 7, 3: 0}, 7),  # replica 3 outside the ISR does not count
        (8, 10, [1, 2], {2: 7}, 8),  # never backwards
        (0, 10, [1, 2], {}, 0),  # unknown follower progress holds the HW
        (3, 10, [1, 2], {2: -1}, 3),
        (0, 5, [1, 2], {2: 9}, 5),  # never above the leader's LEO
    ],
)
def test_high_watermark_table(
    current: int, leader_leo: int, isr: list[int], leos: dict[int, int], expected: int
) -> None:
    progress = {r: _p(leo) for r, leo in leos.items()}
    assert high_watermark(current, 1, leader_leo, isr, progress) == expected


@pytest.mark.parametrize(
    ("before", "fetch_offset", "leader_leo", "now", "caught_up"),
    [
        (ReplicaProgress(), 10, 10, 500, 500),  # at the leader's end: caught up now
        (ReplicaProgress(), 5, 10, 500, 0),  # behind, no previous fetch: not caught up
        # reached the LEO the leader had at the previous fetch (t=300): caught up then
        (ReplicaProgress(4, 0, 8, 300), 8, 12, 500, 300),
        (ReplicaProgress(4, 0, 8, 300), 7, 12, 500, 0),  # short of it: no change
        (ReplicaProgress(4, 900, 8, 300), 8, 12, 500, 900),  # never backwards
    ],
)
def test_record_fetch_table(
    before: ReplicaProgress, fetch_offset: int, leader_leo: int, now: int, caught_up: int
) -> None:
    after = record_fetch(before, fetch_offset, leader_leo, now)
    assert after.log_end_offset == fetch_offset
    assert after.last_caught_up_ms == caught_up
    assert after.last_fetch_leader_leo == leader_leo
    assert after.last_fetch_ms == now


def test_in_sync_window() -> None:
    assert in_sync(_p(10, 0), 10, 99_999, LAG)  # at the end, however long ago
    assert in_sync(_p(5, 1_000), 10, 1_000 + LAG, LAG)
    assert not in_sync(_p(5, 1_000), 10, 1_001 + LAG, LAG)


def _change(
    *,
    isr: list[int] | None = None,
    progress: dict[int, ReplicaProgress],
    high_watermark: int = 5,
    epoch_start_offset: int = 0,
    ineligible: tuple[int, ...] = (),
) -> IsrChange | None:
    return isr_change(
        replicas=[1, 2, 3], isr=isr if isr is not None else [1, 2, 3], leader_id=1,
        progress=progress, leader_leo=10, high_watermark=high_watermark,
        epoch_start_offset=epoch_start_offset, now_ms=20_000, lag_ms=LAG, ineligible=ineligible,
    )


def test_lagging_follower_is_removed_after_the_lag_time() -> None:
    progress = {2: _p(10, 0), 3: _p(5, 9_000)}  # 3 last caught up 11 s ago
    change = _change(progress=progress)
    assert change is not None
    assert change.removed == {3}
    assert not change.added
    assert change.new_isr == (1, 2)
    # within the lag time nothing changes
    assert _change(progress={2: _p(10, 0), 3: _p(5, 10_000)}) is None


def test_leader_is_never_removed_and_removals_come_before_additions() -> None:
    progress = {2: _p(3, 0), 3: _p(10, 0)}
    change = _change(isr=[1, 2], progress=progress)
    assert change is not None
    assert change.removed == {2}
    assert not change.added


@pytest.mark.parametrize(
    ("leo", "hw", "epoch_start", "ineligible", "added"),
    [
        (10, 5, 0, (), {3}),  # caught up: added
        (4, 5, 0, (), set()),  # below the HW: not yet
        (10, 5, 11, (), set()),  # below the start of the leader's epoch: not yet
        (8, 5, 8, (), set()),  # equal to both but behind the leader and never caught up: no
        (10, 5, 0, (3,), set()),  # fenced broker: not eligible
    ],
)
def test_expansion_rule(leo: int, hw: int, epoch_start: int, ineligible: tuple[int, ...], added: set[int]) -> None:
    progress = {2: _p(10, 20_000), 3: _p(leo, 0)}
    change = _change(isr=[1, 2], progress=progress, high_watermark=hw, epoch_start_offset=epoch_start,
                     ineligible=ineligible)
    if added:
        assert change is not None
        assert change.added == added
        assert change.new_isr == (1, 2, 3)
    else:
        assert change is None


def test_expansion_of_a_recently_caught_up_follower_below_the_leader_end() -> None:
    # fetched at 9 (leader at 10) but was at the leader's end 1 s ago: in sync, and past HW/epoch start
    progress = {2: _p(10, 20_000), 3: ReplicaProgress(9, 19_000, 10, 19_000)}
    change = _change(isr=[1, 2], progress=progress, high_watermark=9, epoch_start_offset=9)
    assert change is not None
    assert change.added == {3}
