"""OffsetCommit/OffsetFetch/OffsetDelete, DescribeGroups/ListGroups/DeleteGroups, expiry, replay."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.coordinator.group import (
    GroupConfig,
    GroupState,
    JoinGroupResult,
    OffsetToCommit,
    TopicPartition,
)
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness, subscription

E = ErrorCode
TP = TopicPartition


def commit(h: Harness, group: str, member: str, generation: int, offset: int,
           instance: str | None = None, topic: str = "t", metadata: str = "") -> list[ErrorCode]:
    result = h.coordinator.commit_offsets(
        group_id=group, member_id=member, group_instance_id=instance, generation_id=generation,
        offsets=[OffsetToCommit(topic, 0, offset, 3, metadata), OffsetToCommit(topic, 1, offset)],
        now_ms=h.now_ms,
    )
    h.take(result)  # type: ignore[arg-type]
    assert isinstance(result.response, list)
    return [e for _, e in result.response]


def committed(h: Harness, group: str = "g", topic: str = "t") -> int:
    result = h.coordinator.fetch_offsets(group_id=group, partitions=[TP(topic, 0)])
    return result.response.partitions[0].offset  # type: ignore[union-attr]


def member_of_stable_group(h: Harness, topics: tuple[str, ...] = ("t",)) -> str:
    _, first = h.join(protocols=[("range", subscription(*topics))])
    assert first is not None
    _, answer = h.join(member_id=first.member_id, protocols=[("range", subscription(*topics))])
    assert isinstance(answer, JoinGroupResult)
    h.sync(answer.member_id, answer.generation_id, assignments=[(answer.member_id, b"x")])
    return answer.member_id


def test_simple_commit_from_outside_any_group() -> None:
    h = Harness()
    assert commit(h, "simple", "", -1, 42, metadata="m") == [E.NONE, E.NONE]
    fetched = h.coordinator.fetch_offsets(group_id="simple", partitions=None).response
    assert [(p.topic, p.partition, p.offset) for p in fetched.partitions] == [  # type: ignore[union-attr]
        ("t", 0, 42), ("t", 1, 42)]
    p0 = fetched.partitions[0]  # type: ignore[union-attr]
    assert p0.leader_epoch == 3
    assert p0.metadata == "m"
    [listed] = h.coordinator.list_groups()
    assert listed.group_id == "simple"
    assert listed.state == "Empty"
    assert listed.protocol_type == ""


def test_commit_to_unknown_group_with_a_generation_is_illegal() -> None:
    h = Harness()
    assert commit(h, "lost", "m", 4, 1) == [E.ILLEGAL_GENERATION] * 2
    assert committed(h, "lost") == -1


def test_member_commit_checks_generation_and_member() -> None:
    h = Harness()
    m = member_of_stable_group(h)
    assert commit(h, "g", m, 1, 10) == [E.NONE, E.NONE]
    assert commit(h, "g", m, 2, 99) == [E.ILLEGAL_GENERATION] * 2
    assert commit(h, "g", "stranger", 1, 99) == [E.UNKNOWN_MEMBER_ID] * 2
    assert commit(h, "g", "", -1, 99) == [E.UNKNOWN_MEMBER_ID] * 2  # simple commit, live group
    assert committed(h) == 10  # the rejected commits changed nothing


def state_of(h: Harness, group: str = "g") -> GroupState:
    return h.coordinator.groups[group].state


def test_commit_during_rebalances() -> None:
    h = Harness()
    m = member_of_stable_group(h)
    h.join_new(client="other")  # -> PreparingRebalance: eager members commit before rejoining
    assert h.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert commit(h, "g", m, 1, 5) == [E.NONE, E.NONE]
    h.join(member_id=m)
    assert state_of(h) is GroupState.COMPLETING_REBALANCE
    assert commit(h, "g", m, 2, 6) == [E.REBALANCE_IN_PROGRESS] * 2
    assert committed(h) == 5


def test_commit_counts_as_heartbeat() -> None:
    h = Harness()
    m = member_of_stable_group(h)
    for _ in range(5):
        h.advance(6000)
        assert commit(h, "g", m, 1, 1) == [E.NONE, E.NONE]
    assert h.coordinator.groups["g"].state is GroupState.STABLE


def test_metadata_too_large() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4))
    assert commit(h, "g", "", -1, 7, metadata="12345") == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    assert committed(h) == -1


def test_fetch_unknown_partitions_and_groups() -> None:
    h = Harness()
    result = h.coordinator.fetch_offsets(group_id="nope", partitions=[TP("t", 0)], require_stable=True)
    [p] = result.response.partitions  # type: ignore[union-attr]
    assert (p.offset, p.leader_epoch, p.error) == (-1, -1, E.NONE)


def test_delete_groups() -> None:
    h = Harness()
    member_of_stable_group(h)
    commit(h, "simple", "", -1, 3)
    result = h.coordinator.delete_groups(group_ids=["g", "simple", "missing", ""], now_ms=0)
    h.take(result)  # type: ignore[arg-type]
    assert result.response == [
        ("g", E.NON_EMPTY_GROUP), ("simple", E.NONE), ("missing", E.GROUP_ID_NOT_FOUND),
        ("", E.INVALID_GROUP_ID)]
    assert committed(h, "simple") == -1
    assert [g.group_id for g in h.coordinator.list_groups()] == ["g"]
    assert "simple" not in h.replayed().groups
    assert "simple" not in h.replayed().offsets


def test_offset_delete() -> None:
    h = Harness()
    m = member_of_stable_group(h, ("t",))
    commit(h, "g", m, 1, 8, topic="t")
    commit(h, "g", m, 1, 9, topic="old")
    result = h.coordinator.delete_offsets(
        group_id="g", partitions=[TP("t", 0), TP("old", 0)], now_ms=0)
    h.take(result)  # type: ignore[arg-type]
    assert result.response.partitions == [  # type: ignore[union-attr]
        (TP("t", 0), E.GROUP_SUBSCRIBED_TO_TOPIC), (TP("old", 0), E.NONE)]
    assert committed(h, topic="t") == 8
    assert committed(h, topic="old") == -1
    missing = h.coordinator.delete_offsets(group_id="x", partitions=[], now_ms=0)
    assert missing.response.error is E.GROUP_ID_NOT_FOUND  # type: ignore[union-attr]


def test_offset_delete_non_consumer_group_is_non_empty() -> None:
    h = Harness()
    _, a = h.join(protocol_type="connect", protocols=[("default", b"")], v4=False)
    assert a is not None
    result = h.coordinator.delete_offsets(group_id="g", partitions=[TP("t", 0)], now_ms=0)
    assert result.response.error is E.NON_EMPTY_GROUP  # type: ignore[union-attr]


def test_describe_and_list_with_filters() -> None:
    h = Harness()
    m = member_of_stable_group(h)
    commit(h, "simple", "", -1, 1)
    [d, missing] = h.coordinator.describe_groups(["g", "missing"])
    assert (d.state, d.protocol_type, d.protocol) == ("Stable", "consumer", "range")
    assert [(x.member_id, x.assignment) for x in d.members] == [(m, b"x")]
    assert d.members[0].metadata == subscription("t")
    assert (missing.error, missing.state) == (E.NONE, "Dead")
    assert {g.group_id for g in h.coordinator.list_groups(states_filter=["stable"])} == {"g"}
    assert {g.group_id for g in h.coordinator.list_groups(states_filter=["Empty"])} == {"simple"}
    assert {g.group_id for g in h.coordinator.list_groups(types_filter=["classic"])} == {"g", "simple"}
    assert h.coordinator.list_groups(types_filter=["consumer"]) == []


def test_offsets_of_empty_group_expire_after_retention() -> None:
    day = 24 * 3600 * 1000
    h2 = Harness(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=day,
                             offsets_retention_check_interval_ms=60_000))
    m2 = member_of_stable_group(h2)
    commit(h2, "g", m2, 1, 77)
    left = h2.coordinator.leave_group(group_id="g", members=[(m2, None)], now_ms=h2.now_ms)
    h2.take(left)  # type: ignore[arg-type]
    assert h2.coordinator.groups["g"].state is GroupState.EMPTY
    h2.advance(day - 60_000)
    assert committed(h2) == 77
    h2.advance(120_000)
    assert committed(h2) == -1
    assert "g" not in h2.coordinator.groups  # the empty group went with its offsets
    assert "g" not in h2.replayed().groups


def test_live_group_keeps_offsets_of_subscribed_topics() -> None:
    day = 24 * 3600 * 1000
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=day,
                            offsets_retention_check_interval_ms=3_600_000))
    m = member_of_stable_group(h, ("t",))
    commit(h, "g", m, 1, 5, topic="t")
    commit(h, "g", m, 1, 6, topic="gone")
    for _ in range(30):  # 30 hours, heartbeating every hour of simulated time in 5 s steps
        for _ in range(720):
            h.advance(5000)
            h.heartbeat(m, 1)
    assert committed(h, topic="t") == 5
    assert committed(h, topic="gone") == -1


def test_simple_group_offsets_expire_by_commit_time() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_ms=100_000,
                            offsets_retention_check_interval_ms=10_000))
    commit(h, "s", "", -1, 1)
    h.advance(50_000)
    commit(h, "s", "", -1, 2, topic="u")
    h.advance(60_000)
    assert committed(h, "s", "t") == -1
    assert committed(h, "s", "u") == 2


def test_explicit_retention_from_old_commit_versions() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, offsets_retention_check_interval_ms=1000))
    result = h.coordinator.commit_offsets(
        group_id="s", member_id="", group_instance_id=None, generation_id=-1,
        offsets=[OffsetToCommit("t", 0, 4)], now_ms=0, retention_ms=5000)
    h.take(result)  # type: ignore[arg-type]
    h.advance(4000)
    assert committed(h, "s") == 4
    h.advance(2000)
    assert committed(h, "s") == -1


def test_replay_of_records_reproduces_state() -> None:
    h = Harness()
    m = member_of_stable_group(h)
    commit(h, "g", m, 1, 11)
    commit(h, "simple", "", -1, 12)
    b = h.join_new(client="b")
    h.join(member_id=m)
    jb = h.answers[b]
    assert isinstance(jb, JoinGroupResult)
    h.sync(m, 2, assignments=[(m, b"A"), (jb.member_id, b"B")])
    h.sync(jb.member_id, 2)
    fresh = h.replayed()
    for gid in ("g", "simple"):
        live, loaded = h.coordinator.groups[gid], fresh.groups[gid]
        assert (loaded.state, loaded.generation, loaded.protocol, loaded.leader,
                loaded.protocol_type) == (live.state, live.generation, live.protocol,
                                          live.leader, live.protocol_type)
        assert {k: v.assignment for k, v in loaded.members.items()} == {
            k: v.assignment for k, v in live.members.items()}
    assert fresh.offsets == h.coordinator.offsets
    # loaded members must heartbeat within their session or be expired
    assert fresh.next_deadline() is not None
    result = fresh.poll(h.now_ms + 10_000)
    assert result.records  # the group emptied: a new generation record
    assert fresh.groups["g"].state is GroupState.EMPTY


@given(st.lists(st.text(max_size=8), max_size=5), st.binary(max_size=8))
def test_subscription_topics_round_trip(topics: list[str], user_data: bytes) -> None:
    from kafkapy.coordinator.group.state import _subscription_topics

    assert _subscription_topics(subscription(*topics, user_data=user_data)) == set(topics)


@given(st.binary(max_size=60))
def test_subscription_parser_never_raises(data: bytes) -> None:
    from kafkapy.coordinator.group.state import _subscription_topics

    result = _subscription_topics(data)
    assert result is None or isinstance(result, set)
