"""The group lifecycle at INFO (`kafkapy.coordinator.group`): a join, a rebalance with its
generation, what it waits for and its assignment size, and a member's removal with its reason -
the lines a person reads when a consumer waits. Replaying `__consumer_offsets` logs none."""

from __future__ import annotations

import logging
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.coordinator.group import GroupConfig
from kafkapy.coordinator.group.lifecycle_log import assigned_partitions

from .helpers import Harness

LOGGER = "kafkapy.coordinator.group"


def assignment(topics: dict[str, list[int]]) -> bytes:
    """A consumer-protocol Assignment v0, as the Java and librdkafka clients encode it."""
    out = struct.pack(">hi", 0, len(topics))
    for name, partitions in topics.items():
        raw = name.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)  # no user data


def infos(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]


def two_member_group(h: Harness) -> tuple[str, str]:
    """Two consumers in generation 1 with 3 partitions assigned; (leader, follower)."""
    firsts = [h.join(client=f"app-{i}")[1] for i in range(2)]
    rids = [h.join(member_id=f.member_id, client=f"app-{i}")[0] for i, f in enumerate(firsts) if f]
    answers = [h.answers[r] for r in rids]
    leader = answers[0].leader  # type: ignore[union-attr]
    follower = next(a.member_id for a in answers if a.member_id != leader)  # type: ignore[union-attr]
    h.sync(follower, 1)
    h.sync(leader, 1, assignments=[(leader, assignment({"orders": [0, 1]})),
                                   (follower, assignment({"orders": [2]}))])
    return leader, follower


def test_join_rebalance_and_assignment_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    h = Harness()
    leader, follower = two_member_group(h)
    lines = infos(caplog)
    assert any(f"group g: member {leader} (client.id app-0 from /127.0.0.1) joined" in m for m in lines)
    assert any(f"group g: member {follower} (client.id app-1 from /127.0.0.1) joined" in m for m in lines)
    assert any("group g: rebalancing to generation 1: waiting up to 30000 ms" in m for m in lines)
    assert any("group g: generation 1 formed with 2 members" in m for m in lines)
    assert "group g: generation 1 stable: 3 partitions assigned to 2 members" in lines


def test_initial_delay_says_why_the_first_join_waits(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    h = Harness(config=GroupConfig(initial_rebalance_delay_ms=3000))
    first = h.join(client="app")[1]
    assert first is not None
    h.join(member_id=first.member_id, client="app")
    assert any(
        "waiting 3000 ms (group.initial.rebalance.delay.ms) for more members to join" in m
        for m in infos(caplog)
    )


def test_session_expiry_is_logged_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    leader, follower = two_member_group(h)
    caplog.set_level(logging.INFO, LOGGER)
    for _ in range(3):
        h.advance(4000)
        h.heartbeat(leader, 1)  # the follower stays silent
    lines = infos(caplog)
    assert (
        f"group g: member {follower} (client.id app-1 from /127.0.0.1) removed: "
        "no heartbeat within session.timeout.ms (10000 ms)"
    ) in lines
    assert any("group g: rebalancing to generation 2" in m for m in lines)


def test_a_rebalance_names_the_members_it_waits_for(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    leader, follower = two_member_group(h)
    caplog.set_level(logging.INFO, LOGGER)
    h.join(member_id=leader, client="app-0")  # the leader rejoins: the follower must too
    assert (
        "group g: rebalancing to generation 2: waiting up to 30000 ms (the rebalance timeout) "
        f"for 1 of 2 members to rejoin: {follower} (client.id app-1 from /127.0.0.1)"
    ) in infos(caplog)


def test_leave_is_logged_as_leave(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    _, follower = two_member_group(h)
    caplog.set_level(logging.INFO, LOGGER)
    h.coordinator.leave_group(group_id="g", members=[(follower, None)], now_ms=h.now_ms)
    assert f"group g: member {follower} (client.id app-1 from /127.0.0.1) removed: LeaveGroup" in infos(caplog)


def test_replaying_the_log_logs_no_lifecycle(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    two_member_group(h)
    caplog.set_level(logging.DEBUG, LOGGER)
    h.replayed()
    assert infos(caplog) == []


@given(st.dictionaries(st.text(max_size=20), st.lists(st.integers(0, 2**31 - 1), max_size=20), max_size=8))
def test_assigned_partitions_counts_what_clients_encode(topics: dict[str, list[int]]) -> None:
    assert assigned_partitions(assignment(topics)) == sum(len(ps) for ps in topics.values())


@given(st.binary(max_size=64))
def test_assigned_partitions_never_raises(data: bytes) -> None:
    count = assigned_partitions(data)
    assert count is None or count >= 0
