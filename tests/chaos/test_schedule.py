"""The seeded fault schedule: a seed replays its schedule, and every schedule is well formed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.chaos.schedule import (
    COOLDOWN_S,
    FAULT_KINDS,
    HOLD_RANGES_S,
    RECOVERY_ALLOWANCE_S,
    build_schedule,
    parse_kinds,
)

seeds = st.integers(min_value=0, max_value=2**63)
durations = st.floats(min_value=0, max_value=2000, allow_nan=False)
kind_sets = st.sets(st.sampled_from(FAULT_KINDS), min_size=1).map(lambda s: tuple(k for k in FAULT_KINDS if k in s))


@given(seeds, durations, kind_sets)
def test_same_seed_same_schedule(seed: int, duration: float, kinds: tuple[str, ...]) -> None:
    assert build_schedule(seed, duration, kinds) == build_schedule(seed, duration, kinds)


@given(seeds, durations, kind_sets)
def test_schedule_is_sequential_within_the_duration(seed: int, duration: float, kinds: tuple[str, ...]) -> None:
    schedule = build_schedule(seed, duration, kinds)
    end = 0.0
    for i, fault in enumerate(schedule):
        assert fault.index == i
        assert fault.kind in kinds
        low, high = HOLD_RANGES_S[fault.kind]
        assert low <= fault.hold_s <= high
        assert 0 <= fault.pick < 2**31
        assert fault.at_s >= end, "faults overlap"
        end = fault.at_s + fault.hold_s + RECOVERY_ALLOWANCE_S
        assert end <= duration - COOLDOWN_S + 0.1
    assert len({f.at_s for f in schedule}) == len(schedule)


@given(seeds, st.floats(min_value=100, max_value=2000), kind_sets)
def test_every_kind_appears_before_any_repeats(seed: int, duration: float, kinds: tuple[str, ...]) -> None:
    schedule = build_schedule(seed, duration, kinds)
    first_round = [f.kind for f in schedule[: len(kinds)]]
    assert len(set(first_round)) == len(first_round)
    if len(schedule) >= len(kinds):
        assert set(first_round) == set(kinds)


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_the_issue_seeds_give_at_least_ten_faults_of_every_kind(seed: int) -> None:
    schedule = build_schedule(seed, 150, FAULT_KINDS)
    assert len(schedule) >= 10
    assert {f.kind for f in schedule} == set(FAULT_KINDS)


def test_different_seeds_differ() -> None:
    schedules = {tuple(build_schedule(seed, 150, FAULT_KINDS)) for seed in range(20)}
    assert len(schedules) == 20


def test_parse_kinds() -> None:
    assert parse_kinds("pause, kill") == ("kill", "pause")
    with pytest.raises(ValueError, match=r"unknown fault kind.*nuke"):
        parse_kinds("kill,nuke")
    with pytest.raises(ValueError, match="no fault kinds"):
        parse_kinds(" , ")
