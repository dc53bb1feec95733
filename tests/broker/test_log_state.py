"""Each local partition's log state (`kafkapy.broker.log_state`).

What users rely on: an offline partition stays offline until its log opens or is deleted (a
loading step never hides a failure), it is logged once however often a delta meets it again,
and the counts the metrics and `/readyz` read agree with the states."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker.log_state import LogState, PartitionLogStates


def test_offline_is_logged_once_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    states = PartitionLogStates()
    with caplog.at_level(logging.ERROR, "kafkapy.broker.log_state"):
        assert states.set_offline("t", 0, "No space left on device")
        assert not states.set_offline("t", 0, "No space left on device")
    assert [r.getMessage() for r in caplog.records] == ["t-0 is offline: No space left on device"]
    assert states.reason("t", 0) == "No space left on device"
    assert states.offline() == {("t", 0): "No space left on device"}


def test_an_undeleted_log_is_remembered_until_the_partition_is_ready() -> None:
    states = PartitionLogStates()
    states.set_offline("t", 0, "rename failed", undeleted=True)
    assert states.undeleted("t", 0)
    assert not states.undeleted("t", 1)
    states.set_ready("t", 0)
    assert not states.undeleted("t", 0)


def test_a_healthy_node_keeps_nothing() -> None:
    states = PartitionLogStates()
    assert not states
    assert states.state("t", 0) is LogState.READY
    states.set_loading("t", 0)
    states.set_ready("t", 0)
    assert not states
    assert states.counts() == {}


_KEYS = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2))
_OPS = st.lists(st.tuples(st.sampled_from(["offline", "loading", "ready"]), _KEYS), max_size=40)


@given(_OPS)
def test_states_follow_the_transitions(ops: list[tuple[str, tuple[str, int]]]) -> None:
    states = PartitionLogStates()
    model: dict[tuple[str, int], LogState] = {}
    for op, key in ops:
        if op == "offline":
            states.set_offline(*key, "failed")
            model[key] = LogState.OFFLINE
        elif op == "loading":
            states.set_loading(*key)
            if model.get(key) is not LogState.OFFLINE:  # loading never hides a failure
                model[key] = LogState.LOADING
        else:
            states.set_ready(*key)
            model.pop(key, None)
    for key in [(t, p) for t in "ab" for p in range(3)]:
        assert states.state(*key) is model.get(key, LogState.READY)
    assert set(states.offline()) == {k for k, s in model.items() if s is LogState.OFFLINE}
    assert states.loading_count() == sum(s is LogState.LOADING for s in model.values())
    assert len(states) == len(model) == sum(states.counts().values())
