"""A failed append to `__consumer_offsets`: `GroupCoordinator.revert` brings the state back to
the log, so nothing a client was told failed stays visible, and nobody waits forever.

"The log" here is the list of records whose append succeeded; `log_state` is a coordinator
rebuilt from their bytes, as the driver rebuilds it from the partition's files.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    GroupMetadataKey,
    GroupRecord,
    GroupState,
    JoinGroupResult,
    OffsetToCommit,
    Result,
    SyncGroupResult,
    TopicPartition,
    encode_key,
    encode_value,
)
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness, subscription

E = ErrorCode
TP = TopicPartition


def from_log(records: list[GroupRecord], config: GroupConfig | None = None) -> GroupCoordinator:
    fresh = GroupCoordinator(config)
    for r in records:
        fresh.replay_bytes(encode_key(r.key), encode_value(r.value), producer_id=r.producer_id)
    return fresh


def fail(h: Harness, result: Result[Any], log: list[GroupRecord]) -> Result[None]:
    """The driver's reaction to a failed append of `result.records`."""
    reverted = h.coordinator.revert(
        result.records, from_log(log, h.config), error=E.NOT_COORDINATOR, now_ms=h.now_ms,
        completions=result.completions,
    )
    h.take(reverted)  # type: ignore[arg-type]
    return reverted


def offsets(c: GroupCoordinator, group: str) -> dict[TP, int]:
    fetched = c.fetch_offsets(group_id=group, partitions=None).response
    return {TP(p.topic, p.partition): p.offset for p in fetched.partitions}  # type: ignore[union-attr]


def commit(h: Harness, group: str, offset: int, *, member: str = "", generation: int = -1,
           partition: int = 0) -> Result[list[tuple[TP, ErrorCode]]]:
    return h.coordinator.commit_offsets(
        group_id=group, member_id=member, group_instance_id=None, generation_id=generation,
        offsets=[OffsetToCommit("t", partition, offset)], now_ms=h.now_ms,
    )


def stable_member(h: Harness, assignment: bytes = b"x") -> tuple[str, int]:
    """One member in a Stable group "g"; returns (member id, generation)."""
    _, first = h.join()
    assert first is not None
    _, joined = h.join(member_id=first.member_id)
    assert isinstance(joined, JoinGroupResult)
    h.sync(joined.member_id, joined.generation_id, assignments=[(joined.member_id, assignment)])
    return joined.member_id, joined.generation_id


def test_failed_commit_shows_the_logged_offset_again() -> None:
    h = Harness()
    ok = commit(h, "simple", 10)
    h.take(ok)  # type: ignore[arg-type]
    log = list(ok.records)
    failed = commit(h, "simple", 20)
    assert offsets(h.coordinator, "simple") == {TP("t", 0): 20}  # applied on write...
    fail(h, failed, log)
    assert offsets(h.coordinator, "simple") == {TP("t", 0): 10}  # ...and undone
    assert offsets(from_log(log), "simple") == offsets(h.coordinator, "simple")


def test_failed_first_commit_leaves_no_group_behind() -> None:
    h = Harness()
    failed = commit(h, "new", 5)
    assert [g.group_id for g in h.coordinator.list_groups()] == ["new"]
    fail(h, failed, [])
    assert h.coordinator.list_groups() == []
    assert offsets(h.coordinator, "new") == {}


def test_failed_commit_of_a_member_keeps_the_group_running() -> None:
    h = Harness()
    member, generation = stable_member(h)
    log = list(h.records)
    fail(h, commit(h, "g", 7, member=member, generation=generation), log)
    assert offsets(h.coordinator, "g") == {}
    group = h.coordinator.groups["g"]
    assert group.state is GroupState.STABLE  # offsets alone never disturb the membership
    assert h.heartbeat(member, generation) is E.NONE


def test_failed_join_completion_does_not_burn_the_generation() -> None:
    h = Harness()
    member, generation = stable_member(h)
    log = list(h.records)
    rid = 1000
    result = h.coordinator.join_group(
        request_id=rid, group_id="g", member_id=member, group_instance_id=None, client_id="c",
        client_host="/127.0.0.1", session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
        protocol_type="consumer", protocols=[("range", subscription("t", "u"))],
        require_known_member_id=True, now_ms=h.now_ms,
    )
    assert isinstance(result.response, JoinGroupResult)
    assert result.response.generation_id == generation + 1  # what the failed write carried
    fail(h, result, log)
    group = h.coordinator.groups["g"]
    assert group.generation == generation
    assert group.members[member].assignment == b"x"  # the log's assignment is back
    assert group.state is GroupState.PREPARING_REBALANCE  # everyone must rejoin
    _, again = h.join(member_id=member, protocols=[("range", subscription("t", "u"))])
    assert isinstance(again, JoinGroupResult)
    assert (again.error, again.generation_id) == (E.NONE, generation + 1)


def test_failed_assignment_write_answers_every_waiting_member() -> None:
    h = Harness()
    a = h.join_new(client="a")
    b = h.join_new(client="b")
    first = h.answers[a]
    assert isinstance(first, JoinGroupResult)
    # a joined first and completed alone; b's join triggers a rebalance that a must rejoin
    rejoin, _ = h.join(member_id=first.member_id)
    answers = [h.answers[rejoin], h.answers[b]]
    assert all(isinstance(x, JoinGroupResult) and x.error is E.NONE for x in answers)
    leader = next(x for x in answers if isinstance(x, JoinGroupResult) and x.member_id == x.leader)
    follower = next(x for x in answers if x is not leader)
    assert isinstance(leader, JoinGroupResult)
    assert isinstance(follower, JoinGroupResult)
    generation = leader.generation_id
    log = list(h.records)
    follower_rid, pending = h.sync(follower.member_id, generation)
    assert pending is None
    result = h.coordinator.sync_group(
        request_id=2000, group_id="g", generation_id=generation, member_id=leader.member_id,
        group_instance_id=None, protocol_type=None, protocol_name=None,
        assignments=[(leader.member_id, b"L"), (follower.member_id, b"F")], now_ms=h.now_ms,
    )
    assert result.records  # the assignment write that is about to fail
    assert any(c.request_id == follower_rid for c in result.completions)
    fail(h, result, log)
    answer = h.answers[follower_rid]
    assert isinstance(answer, SyncGroupResult)
    assert (answer.error, answer.assignment) == (E.NOT_COORDINATOR, b"")
    group = h.coordinator.groups["g"]
    assert group.generation == generation
    assert group.state is GroupState.PREPARING_REBALANCE
    assert {m.assignment for m in group.members.values()} == {b""}


def test_members_waiting_in_a_reverted_group_are_answered() -> None:
    h = Harness()
    a = h.join_new(client="a")
    first = h.answers[a]
    assert isinstance(first, JoinGroupResult)
    h.sync(first.member_id, first.generation_id, assignments=[(first.member_id, b"x")])
    b = h.join_new(client="b")  # PreparingRebalance: b waits for a to rejoin
    assert b not in h.answers
    log = list(h.records)
    # a's rejoin completes the join; its write fails
    result = h.coordinator.join_group(
        request_id=3000, group_id="g", member_id=first.member_id, group_instance_id=None,
        client_id="a", client_host="/127.0.0.1", session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000, protocol_type="consumer",
        protocols=[("range", subscription("t"))], require_known_member_id=True, now_ms=h.now_ms,
    )
    assert result.records
    fail(h, result, log)
    waited = h.answers[b]
    assert isinstance(waited, JoinGroupResult)
    assert waited.error is E.NOT_COORDINATOR
    assert list(h.coordinator.groups["g"].members) == [first.member_id]  # b was never logged


def test_requests_still_waiting_in_a_rebuilt_group_are_answered() -> None:
    """Whatever write of the group failed, a Join/SyncGroup it holds gets the error: the rebuilt
    group (the log's) knows nothing of it, so it would otherwise wait forever."""
    h = Harness()
    stable_member(h)
    b = h.join_new(client="b")  # PreparingRebalance: b waits for the first member to rejoin
    assert b not in h.answers
    [metadata] = [r for r in h.records if isinstance(r.key, GroupMetadataKey)][-1:]
    reverted = h.coordinator.revert([metadata], from_log(h.records), error=E.NOT_COORDINATOR,
                                    now_ms=h.now_ms)
    h.take(reverted)  # type: ignore[arg-type]
    answer = h.answers[b]
    assert isinstance(answer, JoinGroupResult)
    assert answer.error is E.NOT_COORDINATOR
    assert all(m.awaiting_join is None for m in h.coordinator.groups["g"].members.values())


def test_failed_transactional_commit_is_not_pending() -> None:
    h = Harness()
    result = h.coordinator.commit_transactional_offsets(
        group_id="g", producer_id=7, producer_epoch=0, member_id="", group_instance_id=None,
        generation_id=-1, offsets=[OffsetToCommit("t", 0, 3)], now_ms=h.now_ms,
    )
    assert h.coordinator.pending_txn_offsets
    fail(h, result, [])
    assert h.coordinator.pending_txn_offsets == {}
    fetched = h.coordinator.fetch_offsets(
        group_id="g", partitions=[TP("t", 0)], require_stable=True
    ).response
    assert fetched.partitions[0].error is E.NONE  # type: ignore[union-attr]
    h.coordinator.replay_transaction_marker(7, commit=True)
    assert offsets(h.coordinator, "g") == {}


def test_failed_group_deletion_brings_group_and_offsets_back() -> None:
    h = Harness()
    ok = commit(h, "g", 4)
    h.take(ok)  # type: ignore[arg-type]
    log = list(ok.records)
    result = h.coordinator.delete_groups(group_ids=["g"], now_ms=h.now_ms)
    assert result.response == [("g", E.NONE)]
    assert "g" not in h.coordinator.groups
    fail(h, result, log)
    assert offsets(h.coordinator, "g") == {TP("t", 0): 4}
    assert [g.group_id for g in h.coordinator.list_groups()] == ["g"]


# -- property: whatever fails, the state is the log's ----------------------------------------

_ops = st.lists(
    st.tuples(
        st.sampled_from(["commit", "delete_offset", "delete_group"]),
        st.sampled_from(["g1", "g2"]),
        st.integers(0, 2),  # partition
        st.integers(0, 1000),  # offset
        st.booleans(),  # does the append fail?
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(_ops)
def test_state_always_equals_the_log_replayed(ops: list[tuple[str, str, int, int, bool]]) -> None:
    h = Harness()
    log: list[GroupRecord] = []
    for op, group, partition, offset, fails in ops:
        result: Result[Any]
        if op == "commit":
            result = commit(h, group, offset, partition=partition)
        elif op == "delete_offset":
            result = h.coordinator.delete_offsets(
                group_id=group, partitions=[TP("t", partition)], now_ms=h.now_ms
            )
        else:
            result = h.coordinator.delete_groups(
                group_ids=[group], now_ms=h.now_ms
            )
        if fails and result.records:
            fail(h, result, log)
        else:
            log.extend(result.records)
            h.take(result)  # type: ignore[arg-type]
        truth = from_log(log)
        for g in ("g1", "g2"):
            assert offsets(h.coordinator, g) == offsets(truth, g)
        assert {g.group_id for g in h.coordinator.list_groups()} == {
            g.group_id for g in truth.list_groups()
        }
