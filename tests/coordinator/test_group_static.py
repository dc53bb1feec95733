"""Static membership (group.instance.id, KIP-345)."""

from __future__ import annotations

from kafkapy.coordinator.group import GroupState, JoinGroupResult, SyncGroupResult
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness

E = ErrorCode


def static_pair(h: Harness) -> tuple[str, str]:
    ra = h.join(instance="i-a", client="a", v4=True)[0]
    rb = h.join(instance="i-b", client="b", v4=True)[0]
    ja, jb = h.answers.get(ra), h.answers.get(rb)
    # static members get a member id at once (no MEMBER_ID_REQUIRED round)
    assert isinstance(ja, JoinGroupResult) and ja.generation_id == 1
    assert isinstance(jb, JoinGroupResult)
    h.sync(jb.member_id, 2 if jb.generation_id == 2 else jb.generation_id)
    return ja.member_id, jb.member_id


def make_stable(h: Harness) -> tuple[str, str]:
    _, a = h.join(instance="i-a", client="a")
    assert a is not None and a.error is E.NONE  # alone: answered at once
    h.sync(a.member_id, 1, instance="i-a", assignments=[(a.member_id, b"pa")])
    rb, _ = h.join(instance="i-b", client="b")
    ra, _ = h.join(member_id=a.member_id, instance="i-a", client="a")
    ja, jb = h.answers[ra], h.answers[rb]
    assert isinstance(ja, JoinGroupResult) and isinstance(jb, JoinGroupResult)
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
    assert again is not None and again.error is E.NONE
    assert again.generation_id == 2 and again.member_id != b
    assert h.coordinator.groups["g"].state is GroupState.STABLE
    assert h.heartbeat(a, 2, instance="i-a") is E.NONE  # the others see no rebalance
    _, sync = h.sync(again.member_id, 2, instance="i-b")
    assert sync is not None and sync.assignment == b"pb"  # gets its partitions back
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
    a, _ = make_stable(h)
    _, again = h.join(instance="i-a", client="a")
    assert again is not None and again.leader == again.member_id and again.skip_assignment
    assert h.coordinator.groups["g"].leader == again.member_id


def test_duplicate_instance_with_other_member_id_is_fenced() -> None:
    h = Harness()
    a, b = make_stable(h)
    _, dup = h.join(member_id="someone-else", instance="i-a")
    assert dup is not None and dup.error is E.FENCED_INSTANCE_ID
    _, s = h.sync(b, 2, instance="i-a")
    assert s is not None and s.error is E.FENCED_INSTANCE_ID
    result = h.coordinator.leave_group(group_id="g", members=[(b, "i-a")], now_ms=h.now_ms)
    assert result.response.members[0].error is E.FENCED_INSTANCE_ID  # type: ignore[union-attr]


def test_old_incarnation_waiting_in_join_is_fenced() -> None:
    h = Harness()
    a, b = make_stable(h)
    h.join(member_id=a, instance="i-a")  # leader rejoin -> PreparingRebalance
    old_b, _ = h.join(member_id=b, instance="i-b")
    # b's old process hangs; its replacement comes in
    if old_b in h.answers:  # the rebalance completed already (both rejoined)
        return
    new_rid, _ = h.join(instance="i-b")
    assert isinstance(h.answers[old_b], JoinGroupResult)
    assert h.answers[old_b].error is E.FENCED_INSTANCE_ID  # type: ignore[union-attr]
    del new_rid


def test_static_member_leave_by_instance_id_triggers_rebalance() -> None:
    h = Harness()
    a, b = make_stable(h)
    result = h.coordinator.leave_group(group_id="g", members=[("", "i-b")], now_ms=h.now_ms)
    h.take(result)  # type: ignore[arg-type]
    assert result.response.members[0].error is E.NONE  # type: ignore[union-attr]
    assert h.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE


def test_static_member_session_expiry() -> None:
    h = Harness()
    a, b = make_stable(h)
    for _ in range(3):
        h.advance(4000)
        h.heartbeat(a, 2, instance="i-a")
    assert "i-b" not in h.coordinator.groups["g"].static_members
    assert isinstance(h.answers.get(0), SyncGroupResult | None)
