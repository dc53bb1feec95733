"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup: every transition and timer of a classic group."""

from __future__ import annotations

import pytest

from kafkapy.coordinator.group import (
    VALID_PREVIOUS,
    ClassicGroup,
    GroupConfig,
    GroupState,
    JoinGroupResult,
    SyncGroupResult,
)
from kafkapy.coordinator.group.state import IllegalStateTransition
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness, subscription

E = ErrorCode
S = GroupState


def state(h: Harness, group: str = "g") -> GroupState:
    return h.coordinator.groups[group].state


def joined(h: Harness, rid: int) -> JoinGroupResult:
    answer = h.answers[rid]
    assert isinstance(answer, JoinGroupResult)
    return answer


def synced(h: Harness, rid: int) -> SyncGroupResult:
    answer = h.answers[rid]
    assert isinstance(answer, SyncGroupResult)
    return answer


def stable_group(h: Harness, n: int, **kw: object) -> list[str]:
    """n members joined at the same instant and synced; returns member ids, leader first.

    All first (MEMBER_ID_REQUIRED) joins come before the real joins, so the pending members
    keep the rebalance open until everyone is in: one generation.
    """
    firsts = [h.join(client=f"c{i}", **kw)[1] for i in range(n)]  # type: ignore[arg-type]
    rids = [h.join(member_id=f.member_id, **kw)[0] for f in firsts if f]  # type: ignore[arg-type]
    results = [joined(h, r) for r in rids]
    gen = results[0].generation_id
    assert all(r.generation_id == gen for r in results)
    leader = results[0].leader
    ids = [r.member_id for r in results]
    followers = [m for m in ids if m != leader]
    for m in followers:
        h.sync(m, gen)
    h.sync(leader, gen, assignments=[(m, m.encode()) for m in ids])
    assert state(h) is S.STABLE
    return [leader, *followers]


def test_transition_table_is_kafkas() -> None:
    assert VALID_PREVIOUS[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS[S.PREPARING_REBALANCE] == {S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS[S.STABLE] == {S.COMPLETING_REBALANCE}
    g = ClassicGroup("g")
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.STABLE, 0)
    for target in S:
        for source in S:
            g.state = source
            if source in VALID_PREVIOUS[target]:
                g.transition_to(target, 5)
                assert g.state is target
            else:
                with pytest.raises(IllegalStateTransition):
                    g.transition_to(target, 5)


def test_lone_v4_consumer_joins_without_waiting() -> None:
    h = Harness()
    _, first = h.join()
    assert first is not None
    assert first.error is E.MEMBER_ID_REQUIRED
    assert first.member_id
    _, answer = h.join(member_id=first.member_id)
    # answered in the same call: no initial delay, nobody else to wait for
    assert answer is not None
    assert answer.error is E.NONE
    assert answer.generation_id == 1
    assert answer.leader == first.member_id
    assert answer.protocol_name == "range"
    assert answer.protocol_type == "consumer"
    assert [m.member_id for m in answer.members] == [first.member_id]
    assert state(h) is S.COMPLETING_REBALANCE
    _, sync = h.sync(first.member_id, 1, assignments=[(first.member_id, b"A")])
    assert sync is not None
    assert sync.error is E.NONE
    assert sync.assignment == b"A"
    assert state(h) is S.STABLE


def test_old_versions_join_in_one_round_trip_and_default_rebalance_timeout() -> None:
    h = Harness()
    _, answer = h.join(v4=False, rebalance_ms=-1, session_ms=7000)
    assert answer is not None
    assert answer.error is E.NONE
    assert answer.generation_id == 1
    member = h.coordinator.groups["g"].members[answer.member_id]
    assert member.rebalance_timeout_ms == 7000


def test_initial_rebalance_delay_batches_a_starting_fleet() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    a = h.join_new(client="a")
    assert a not in h.answers
    assert state(h) is S.PREPARING_REBALANCE
    assert h.coordinator.next_deadline() == 3000
    h.advance(1000)
    b = h.join_new(client="b")
    h.advance(2000)  # first delay ends, but a member arrived: extended by another delay
    assert a not in h.answers
    h.advance(3000)
    assert joined(h, a).generation_id == joined(h, b).generation_id == 1
    assert len(joined(h, a).members) + len(joined(h, b).members) == 2


def test_initial_delay_is_bounded_by_rebalance_timeout() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=3000))
    rid = h.join_new(rebalance_ms=2000)
    h.advance(1999)
    assert rid not in h.answers
    h.advance(1)
    assert joined(h, rid).error is E.NONE


def test_second_member_triggers_rebalance_and_leader_gets_member_list() -> None:
    h = Harness()
    [a] = stable_group(h, 1)
    b_rid = h.join_new(client="b")
    assert state(h) is S.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) is E.REBALANCE_IN_PROGRESS
    a_rid, _ = h.join(member_id=a)
    ja, jb = joined(h, a_rid), joined(h, b_rid)
    assert ja.generation_id == jb.generation_id == 2
    assert ja.leader == jb.leader == a  # the leader keeps its role
    assert {m.member_id for m in ja.members} == {a, jb.member_id}
    assert jb.members == []
    # follower's sync waits for the leader; an empty assignment from the leader is valid
    b_sync, pending = h.sync(jb.member_id, 2)
    assert pending is None
    _, leader_sync = h.sync(a, 2, assignments=[])
    assert leader_sync is not None
    assert leader_sync.assignment == b""
    assert synced(h, b_sync).error is E.NONE
    assert synced(h, b_sync).assignment == b""
    assert state(h) is S.STABLE


def test_protocol_selection_uses_only_common_protocols() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=10))
    m = subscription("t")
    r1 = h.join_new(client="a", protocols=[("range", m), ("roundrobin", m)])
    r2 = h.join_new(client="b", protocols=[("roundrobin", m), ("range", m)])
    r3 = h.join_new(client="c", protocols=[("roundrobin", m)])
    h.advance(10)  # members arrived during the first delay: one more delay
    assert r1 not in h.answers
    h.advance(10)
    assert {joined(h, r).protocol_name for r in (r1, r2, r3)} == {"roundrobin"}


def test_inconsistent_group_protocol() -> None:
    h = Harness()
    stable_group(h, 1)
    _, bad_name = h.join(protocols=[("sticky", b"")])
    assert bad_name is not None
    assert bad_name.error is E.INCONSISTENT_GROUP_PROTOCOL
    _, bad_type = h.join(protocol_type="connect")
    assert bad_type is not None
    assert bad_type.error is E.INCONSISTENT_GROUP_PROTOCOL
    _, no_protocols = h.join("other", protocols=[])
    assert no_protocols is not None
    assert no_protocols.error is E.INCONSISTENT_GROUP_PROTOCOL
    assert "other" not in h.coordinator.groups  # a failed join leaves no empty group behind
    assert [g.group_id for g in h.coordinator.list_groups()] == ["g"]
    assert state(h) is S.STABLE


@pytest.mark.parametrize("session_ms", [5999, 1_800_001])
def test_session_timeout_bounds(session_ms: int) -> None:
    h = Harness()
    _, answer = h.join(session_ms=session_ms)
    assert answer is not None
    assert answer.error is E.INVALID_SESSION_TIMEOUT


def test_unknown_member_and_dead_group_errors() -> None:
    h = Harness()
    _, a = h.join(member_id="nobody")
    assert a is not None
    assert a.error is E.UNKNOWN_MEMBER_ID
    [m] = stable_group(h, 1)
    _, b = h.join(member_id="nobody")
    assert b is not None
    assert b.error is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nobody", 1) is E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(m, 7) is E.ILLEGAL_GENERATION
    assert h.heartbeat(m, 1, "missing") is E.UNKNOWN_MEMBER_ID
    _, s = h.sync(m, 9)
    assert s is not None
    assert s.error is E.ILLEGAL_GENERATION
    _, s = h.sync("nobody", 1)
    assert s is not None
    assert s.error is E.UNKNOWN_MEMBER_ID


def test_sync_checks_protocol_type_and_name_in_v5() -> None:
    h = Harness()
    [m] = stable_group(h, 1)
    _, bad = h.sync(m, 1, protocol_type="connect")
    assert bad is not None
    assert bad.error is E.INCONSISTENT_GROUP_PROTOCOL
    _, bad = h.sync(m, 1, protocol_name="roundrobin")
    assert bad is not None
    assert bad.error is E.INCONSISTENT_GROUP_PROTOCOL
    _, ok = h.sync(m, 1, protocol_type="consumer", protocol_name="range")
    assert ok is not None
    assert ok.error is E.NONE
    assert ok.protocol_name == "range"


def test_sync_during_preparing_rebalance_is_rejected() -> None:
    h = Harness()
    [a] = stable_group(h, 1)
    h.join_new(client="b")
    _, s = h.sync(a, 1)
    assert s is not None
    assert s.error is E.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    for _ in range(2):
        h.advance(4000)
        assert h.heartbeat(a, 1) is E.NONE  # b stays silent
    h.advance(2000)  # b's 10 s session is over
    assert state(h) is S.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) is E.REBALANCE_IN_PROGRESS
    assert b not in h.coordinator.groups["g"].members
    rid, _ = h.join(member_id=a)
    assert joined(h, rid).generation_id == 2
    assert len(joined(h, rid).members) == 1
    assert h.heartbeat(b, 1) is E.UNKNOWN_MEMBER_ID


def test_last_member_expiring_empties_the_group() -> None:
    h = Harness()
    stable_group(h, 1)
    h.advance(10_000)
    assert state(h) is S.EMPTY
    assert h.coordinator.groups["g"].generation == 2


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b = stable_group(h, 2, session_ms=60_000, rebalance_ms=20_000)
    rid, _ = h.join(member_id=a, session_ms=60_000, rebalance_ms=20_000)  # leader rejoin
    assert state(h) is S.PREPARING_REBALANCE
    h.advance(19_999)
    assert rid not in h.answers
    h.advance(1)
    ja = joined(h, rid)
    assert ja.generation_id == 2
    assert [m.member_id for m in ja.members] == [a]
    assert b not in h.coordinator.groups["g"].members


def test_member_dying_mid_sync_leader_silent() -> None:
    """The leader dies after the join: followers waiting in SyncGroup are told to rejoin."""
    h = Harness()
    a, b = stable_group(h, 2)
    h.join(member_id=a)
    b_rid, _ = h.join(member_id=b)
    assert state(h) is S.COMPLETING_REBALANCE
    b_sync, _ = h.sync(b, 2)
    assert b_sync not in h.answers
    h.advance(5000)
    assert h.heartbeat(b, 2) is E.NONE
    h.advance(5000)  # a never syncs nor heartbeats
    assert synced(h, b_sync).error is E.REBALANCE_IN_PROGRESS
    assert a not in h.coordinator.groups["g"].members
    assert state(h) is S.PREPARING_REBALANCE
    rid, _ = h.join(member_id=b)
    assert joined(h, rid).leader == b
    assert joined(h, rid).generation_id == 3
    del b_rid


def test_member_dying_mid_sync_follower_silent() -> None:
    """A follower dies before its SyncGroup: the group turns Stable, then its session expires."""
    h = Harness()
    a, b = stable_group(h, 2)
    h.join(member_id=a)
    h.join(member_id=b)
    _, la = h.sync(a, 2, assignments=[(a, b"x"), (b, b"y")])
    assert la is not None
    assert la.assignment == b"x"
    assert state(h) is S.STABLE
    for _ in range(3):
        h.advance(4000)
        h.heartbeat(a, 2)
    assert state(h) is S.PREPARING_REBALANCE
    assert set(h.coordinator.groups["g"].members) == {a}


def test_sync_timeout_removes_members_that_never_sync() -> None:
    h = Harness()
    a, b = stable_group(h, 2, session_ms=30_000, rebalance_ms=8_000)
    h.join(member_id=a, session_ms=30_000, rebalance_ms=8_000)
    h.join(member_id=b, session_ms=30_000, rebalance_ms=8_000)
    h.sync(a, 2, assignments=[(a, b"x"), (b, b"y")])
    h.advance(5000)
    assert h.heartbeat(b, 2) is E.NONE  # alive, but never sends SyncGroup
    h.advance(3000)
    assert b not in h.coordinator.groups["g"].members
    assert state(h) is S.PREPARING_REBALANCE


def test_leader_leaving_during_completing_rebalance() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    h.join(member_id=a)
    h.join(member_id=b)
    b_sync, _ = h.sync(b, 2)
    result = h.coordinator.leave_group(group_id="g", members=[(a, None)], now_ms=h.now_ms)
    h.take(result)  # type: ignore[arg-type]
    assert result.response.error is E.NONE  # type: ignore[union-attr]
    assert synced(h, b_sync).error is E.REBALANCE_IN_PROGRESS
    assert state(h) is S.PREPARING_REBALANCE
    rid, answer = h.join(member_id=b)
    answer = answer or joined(h, rid)
    assert answer.leader == b
    assert answer.generation_id == 3


def test_batched_leave_empties_group_and_reports_per_member() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    result = h.coordinator.leave_group(
        group_id="g", members=[(a, None), (b, None), ("ghost", None)], now_ms=h.now_ms
    )
    h.take(result)  # type: ignore[arg-type]
    errors = [m.error for m in result.response.members]  # type: ignore[union-attr]
    assert errors == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert state(h) is S.EMPTY
    assert h.coordinator.groups["g"].generation == 2
    missing = h.coordinator.leave_group(group_id="nope", members=[(a, None)], now_ms=0)
    assert missing.response.error is E.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]


def test_pending_member_that_never_rejoins_expires() -> None:
    h = Harness()
    [a] = stable_group(h, 1)
    _, first = h.join(client="slow")  # gets MEMBER_ID_REQUIRED, never comes back
    assert first is not None
    assert first.error is E.MEMBER_ID_REQUIRED
    rid, _ = h.join(member_id=a)  # leader rejoin starts a rebalance
    assert rid not in h.answers  # waits for the pending member...
    h.advance(10_000)  # ...until its session timeout
    assert joined(h, rid).generation_id == 2


def test_stable_follower_rejoin_with_same_metadata_needs_no_rebalance() -> None:
    h = Harness()
    _a, b = stable_group(h, 2)
    _, answer = h.join(member_id=b)
    assert answer is not None
    assert answer.generation_id == 1
    assert answer.members == []
    assert state(h) is S.STABLE


def test_cooperative_rounds_follow_changed_metadata() -> None:
    """Cooperative-sticky: members rejoin with new owned partitions -> another round."""
    h = Harness()
    a, b = stable_group(h, 2)
    c_rid = h.join_new(client="c")
    ra, _ = h.join(member_id=a)
    rb, _ = h.join(member_id=b)
    assert joined(h, c_rid).generation_id == 2
    c = joined(h, c_rid).member_id
    h.sync(b, 2)
    h.sync(c, 2)
    h.sync(a, 2, assignments=[(a, b"a"), (b, b"b"), (c, b"")])
    assert state(h) is S.STABLE
    # round two: b revoked a partition and rejoins with changed user data
    rb2, _ = h.join(member_id=b, protocols=[("range", subscription("t", user_data=b"r"))])
    assert state(h) is S.PREPARING_REBALANCE
    ra2, _ = h.join(member_id=a)
    rc2, _ = h.join(member_id=c)
    assert {joined(h, r).generation_id for r in (ra2, rb2, rc2)} == {3}
    del ra, rb


def test_join_storm_of_200_members_is_one_rebalance() -> None:
    h = Harness()
    firsts = [h.join(client=f"c{i}")[1] for i in range(200)]
    assert all(f is not None and f.error is E.MEMBER_ID_REQUIRED for f in firsts)
    rids = [h.join(member_id=f.member_id)[0] for f in firsts if f is not None]
    answers = [joined(h, r) for r in rids]
    assert {a.generation_id for a in answers} == {1}
    assert len(h.coordinator.groups["g"].members) == 200
    leader = [a for a in answers if a.member_id == a.leader]
    assert len(leader) == 1
    assert len(leader[0].members) == 200


def test_group_max_size() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, max_size=1))
    stable_group(h, 1)
    _, answer = h.join(client="x")
    assert answer is not None
    assert answer.error is E.GROUP_MAX_SIZE_REACHED


def test_retried_join_while_completing_gets_current_generation() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    h.join(member_id=a)
    rb, _ = h.join(member_id=b)
    _, again = h.join(member_id=b)  # the first answer was lost
    assert again is not None
    assert again.generation_id == joined(h, rb).generation_id == 2


def test_superseded_join_request_gets_an_answer() -> None:
    h = Harness()
    a, b = stable_group(h, 2)
    first, _ = h.join(member_id=a)
    second, _ = h.join(member_id=a)
    assert joined(h, first).error is E.REBALANCE_IN_PROGRESS
    h.join(member_id=b)
    assert joined(h, second).error is E.NONE


def test_group_that_never_formed_is_forgotten() -> None:
    h = Harness()
    _, first = h.join("ghost")
    assert first is not None
    assert first.error is E.MEMBER_ID_REQUIRED
    assert "ghost" in h.coordinator.groups
    h.advance(10_000)  # the client never came back with its member id
    assert "ghost" not in h.coordinator.groups
    assert h.records == []
