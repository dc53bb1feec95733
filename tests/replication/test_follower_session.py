"""The follower's side of a fetch session (KIP-227): what each request carries, and that the
leader's view of the session always matches what the follower fetches."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.replication.follower_session import (
    INITIAL_EPOCH,
    MAX_EPOCH,
    FollowerSession,
    SessionRequest,
    WantedPartition,
)

TOPIC_ID = uuid.UUID(int=7)


def _w(partition: int, offset: int, *, epoch: int = 1, log_start: int = 0) -> WantedPartition:
    return WantedPartition("t", TOPIC_ID, partition, offset, epoch, epoch, log_start)


def test_full_first_then_only_moved_offsets_and_forgotten_partitions() -> None:
    session = FollowerSession()
    first = session.build([_w(0, 5), _w(1, 7)])
    assert first.full
    assert first.session_id == 0
    assert len(first.send) == 2
    session.answered(first, 42)
    idle = session.build([_w(0, 5), _w(1, 7)])
    assert (idle.session_id, idle.epoch, idle.send, idle.forgotten) == (42, 1, [], [])
    session.answered(idle, 42)
    moved = session.build([_w(0, 9)])
    assert moved.epoch == 2
    assert moved.send == [_w(0, 9)]
    assert moved.forgotten == [(TOPIC_ID, 1)]


def test_a_new_partition_or_epoch_or_log_start_makes_the_request_full() -> None:
    for changed in ([_w(0, 5), _w(1, 0)], [_w(0, 5, epoch=2)], [_w(0, 5, log_start=3)]):
        session = FollowerSession()
        session.answered(session.build([_w(0, 5)]), 42)
        request = session.build(changed)
        assert request.full
        assert request.session_id == 42
        assert sorted(w.partition for w in request.send) == sorted(w.partition for w in changed)


def test_no_slot_on_the_leader_keeps_full_requests_and_reset_starts_over() -> None:
    session = FollowerSession()
    session.answered(session.build([_w(0, 5)]), 0)
    assert session.build([_w(0, 5)]).full
    session.answered(session.build([_w(0, 5)]), 9)
    assert not session.build([_w(0, 5)]).full
    session.reset()
    assert session.build([_w(0, 5)]).full
    assert session.resets == 1


def test_the_epoch_wraps_to_one() -> None:
    session = FollowerSession()
    session.answered(session.build([_w(0, 5)]), 9)
    session.epoch = MAX_EPOCH
    session.answered(session.build([_w(0, 5)]), 9)
    assert session.epoch == 1


class _Leader:
    """The leader's session as KIP-227 keeps it: a fetch offset per partition."""

    def __init__(self) -> None:
        self.held: dict[tuple[uuid.UUID, int], int] = {}

    def answer(self, request: SessionRequest) -> None:
        if request.epoch == INITIAL_EPOCH:
            self.held = {}
        for w in request.send:
            self.held[w.key] = w.fetch_offset
        for key in request.forgotten:
            self.held.pop(key, None)


steps = st.lists(
    st.tuples(
        st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 3), st.integers(1, 2)), max_size=6),
        st.sampled_from(["answered", "lost", "no-slot"]),
    ),
    max_size=25,
)


@settings(max_examples=150)
@given(steps=steps)
def test_the_leaders_session_always_holds_what_the_follower_fetches(
    steps: list[tuple[dict[int, tuple[int, int]], str]],
) -> None:
    session = FollowerSession()
    leader = _Leader()
    for parts, outcome in steps:
        wanted = [_w(p, offset, epoch=epoch) for p, (offset, epoch) in parts.items()]
        request = session.build(wanted)
        if outcome == "lost":  # no answer (or FETCH_SESSION_ID_NOT_FOUND): the leader's state is unknown
            session.reset()
            continue
        no_slot = outcome == "no-slot" and request.full
        leader.answer(request)
        session.answered(request, 0 if no_slot else 11)
        if not no_slot:  # an open session: incremental requests build on what the leader holds
            assert leader.held == {w.key: w.fetch_offset for w in wanted}
