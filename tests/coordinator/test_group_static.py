"""Static membership (group.instance.id, KIP-345)."""

from __future__ import annotations

from kafkapy.coordinator.group import GroupState, JoinGroupResult
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness

E = ErrorCode


def make_stable(h: Harness) -> tuple[str, str]:
    _, a = h.join(instance="i-a", client="a")
    assert a is not None
    assert a.error is E.NONE
    h.sync(a.member_id, 1, instance="i-a", assignments=[(a.member_id, b"pa")])
    rb, _ = h.join(instance="i-b", client="b")
    ra, _ = h.join(member_id=a.member_id, instance="i-a", client="a")
    ja, jb = h.answers[ra], h.answers[rb]
    assert isinstance(ja, JoinGroupResult)
    assert isinstance(jb, JoinGroupResult)
    assert ja.generation_id == jb.generation_id == 2
    assert {m.group_instance_id for m in ja.members} == {"i-a", "i-b"}
    h.sync(jb.member_id, 2, instance="i-b")
    h.sync(ja.member_id, 2, instance="i-a",
           assignments=[(ja.member_id, b"pa"), (jb.member_id, b"pb")])
    assert h.coordinator.groups["g"].state is GroupState.STABLE
    return ja.member_id, jb.member_id


def test_restarted_static_member_rejoins_without_rebalance() -> None:
    h = Harness()
    a, b = make_stable(h)
    records_before = len(h.records)
    _, again = h.join(instance="i-b", client="b")  # restarted: no member id
    assert again is not None
    assert again.error is E.NONE
    assert again.generation_id == 2
    assert again.member_id != b
    assert h.coordinator.groups["g"].state is GroupState.STABLE
    assert h.heartbeat(a, 2, instance="i-a") is E.NONE  # the others see no rebalance
    _, sync = h.sync(again.member_id, 2, instance="i-b")
    assert sync is not None
    assert sync.assignment == b"pb"
    # the new member id was persisted
    assert len(h.records) == records_before + 1
    assert b not in h.replayed().groups["g"].members
    # the old incarnation is fenced
    assert h.heartbeat(b, 2, instance="i-b") is E.FENCED_INSTANCE_ID
    commit = h.coordinator.commit_offsets(
        group_id="g", member_id=b, group_instance_id="i-b", generation_id=2, offsets=[],
        now_ms=h.now_ms,
    )
    assert commit.response == []


def test_restarted_static_leader_is_told_to_skip_assignment() -> None:
    h = Harness()
    _a, _ = make_stable(h)
    _, again = h.join(instance="i-a", client="a")
    assert again is not None
    assert again.leader == again.member_id
    assert again.skip_assignment
    assert h.coordinator.groups["g"].leader == again.member_id


def test_duplicate_instance_with_other_member_id_is_fenced() -> None:
    h = Harness()
    _a, b = make_stable(h)
    _, dup = h.join(member_id="someone-else", instance="i-a")
    assert dup is not None
    assert dup.error is E.FENCED_INSTANCE_ID
    _, s = h.sync(b, 2, instance="i-a")
    assert s is not None
    assert s.error is E.FENCED_INSTANCE_ID
    result = h.coordinator.leave_group(group_id="g", members=[(b, "i-a")], now_ms=h.now_ms)
    assert result.response.members[0].error is E.FENCED_INSTANCE_ID  # type: ignore[union-attr]


def test_old_incarnation_waiting_in_join_is_fenced() -> None:
    h = Harness()
    a, b = make_stable(h)
    rc, _ = h.join(instance="i-c", client="c")  # a third member: PreparingRebalance
    ra, _ = h.join(member_id=a, instance="i-a")
    old_b, _ = h.join(member_id=b, instance="i-b")
    joined_c = h.answers[rc]
    assert isinstance(joined_c, JoinGroupResult)
    assert joined_c.generation_id == 3
    # round two: c's rejoin with new metadata opens a rebalance that b's old process joins...
    h.join(member_id=joined_c.member_id, instance="i-c", protocols=[("range", b"v2")])
    stale_b, _ = h.join(member_id=b, instance="i-b")
    assert stale_b not in h.answers  # waiting for a
    # ...then b's process is replaced by a restarted one before the rebalance completes
    new_b, _ = h.join(instance="i-b", client="b")
    stale = h.answers[stale_b]
    assert isinstance(stale, JoinGroupResult)
    assert stale.error is E.FENCED_INSTANCE_ID
    assert b not in h.coordinator.groups["g"].members
    h.join(member_id=a, instance="i-a")
    fresh = h.answers[new_b]
    assert isinstance(fresh, JoinGroupResult)
    assert fresh.error is E.NONE
    assert fresh.generation_id == 4
    del ra, old_b


def test_static_member_leave_by_instance_id_triggers_rebalance() -> None:
    h = Harness()
    _a, _b = make_stable(h)
    result = h.coordinator.leave_group(group_id="g", members=[("", "i-b")], now_ms=h.now_ms)
    h.take(result)  # type: ignore[arg-type]
    assert result.response.members[0].error is E.NONE  # type: ignore[union-attr]
    assert h.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_static_member_session_expiry() -> None:
    h = Harness()
    a, _b = make_stable(h)
    for _ in range(3):
        h.advance(4000)
        h.heartbeat(a, 2, instance="i-a")
    assert "i-b" not in h.coordinator.groups["g"].static_members
    assert h.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
