"""KIP-848 consumer groups: the rules of ConsumerGroupHeartbeat users rely on.

Each test drives `GroupCoordinator.consumer_group_heartbeat` like a client would (join with
epoch 0, heartbeat with the epoch it got, report owned partitions after revoking) and checks
what a client sees: epochs, assignments, error codes; and that replaying the records written
rebuilds the same state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.coordinator.group import (
    ConsumerGroupKey,
    ConsumerGroupState,
    ConsumerMemberKey,
    ConsumerMemberValue,
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    GroupRecordError,
    HeartbeatResult,
    OffsetToCommit,
    Pending,
    TopicPartition,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkapy.coordinator.group.consumer_state import partition_set
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness, subscription


@dataclass
class Consumer:
    """What a client keeps: its id, epoch and owned partitions."""

    member_id: str = ""
    epoch: int = 0
    owned: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class CH:
    """Harness: one coordinator, a topic table, a clock and every record written."""

    config: GroupConfig = field(default_factory=GroupConfig)
    topics: dict[str, int] = field(default_factory=lambda: {"t": 6, "u": 2})
    now_ms: int = 0
    records: list[GroupRecord] = field(default_factory=list)
    #: topic -> each partition's replica racks (the metadata image's)
    racks: dict[str, list[frozenset[str]]] = field(default_factory=dict)
    coordinator: GroupCoordinator = field(init=False)

    def __post_init__(self) -> None:
        self.coordinator = GroupCoordinator(self.config)
        self.coordinator.load_complete(self.now_ms)

    def beat(
        self,
        c: Consumer,
        *,
        group: str = "g",
        topics: list[str] | None = None,
        owned: Mapping[str, Iterable[int]] | None = None,
        epoch: int | None = None,
        instance: str | None = None,
        assignor: str | None = None,
        regex: str | None = None,
        rack: str | None = None,
    ) -> HeartbeatResult:
        result = self.coordinator.consumer_group_heartbeat(
            group_id=group,
            member_id=c.member_id,
            member_epoch=c.epoch if epoch is None else epoch,
            instance_id=instance,
            rack_id=rack,
            rebalance_timeout_ms=30_000,
            subscribed_topics=topics,
            subscribed_regex=regex,
            server_assignor=assignor,
            owned=owned,
            client_id="client",
            client_host="/127.0.0.1",
            partitions_of=self.topics.get,
            now_ms=self.now_ms,
            replica_racks=self.racks.get,
        )
        self.records.extend(result.records)
        r = result.response
        assert isinstance(r, HeartbeatResult)
        if r.error is ErrorCode.NONE:
            c.member_id = r.member_id or c.member_id
            c.epoch = r.member_epoch
            if r.assignment is not None:
                c.owned = r.assignment
        return r

    def join(self, c: Consumer, topics: list[str], **kw: object) -> HeartbeatResult:
        c.epoch = 0
        return self.beat(c, topics=topics, owned={}, **kw)  # type: ignore[arg-type]

    def ack(self, c: Consumer) -> HeartbeatResult:
        """A heartbeat reporting exactly what the client now owns (it revoked what it lost)."""
        return self.beat(c, owned=c.owned)

    def tick(self, ms: int) -> None:
        self.now_ms += ms
        self.records.extend(self.coordinator.poll(self.now_ms).records)

    def replayed(self) -> GroupCoordinator:
        fresh = GroupCoordinator(self.config)
        for r in self.records:
            key = encode_key(r.key)
            fresh.replay_bytes(key, encode_value(r.value))
            assert decode_value(decode_key(key), encode_value(r.value)) == r.value
        return fresh


def owned_tps(c: Consumer) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in c.owned.items() for p in ps}


def settle(h: CH, consumers: list[Consumer], rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in consumers:
            h.ack(c)


def test_first_member_gets_every_partition_at_epoch_one() -> None:
    h, a = CH(), Consumer()
    r = h.join(a, ["t"])
    assert r.error is ErrorCode.NONE
    assert r.member_id
    assert r.member_epoch == 1
    assert r.heartbeat_interval_ms == 5000
    assert r.assignment == {"t": [0, 1, 2, 3, 4, 5]}
    group = h.coordinator.consumer_groups["g"]
    assert group.state is ConsumerGroupState.STABLE
    assert group.group_epoch == group.assignment_epoch == 1


def test_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"])
    rb = h.join(b, ["t"])
    # b moves to epoch 2 but everything it is targeted is still owned by a
    assert rb.member_epoch == 2
    assert rb.assignment == {}
    ra = h.ack(a)  # a learns it must give up three partitions; its epoch stays 1
    assert ra.member_epoch == 1
    assert len(owned_tps(a)) == 3
    group = h.coordinator.consumer_groups["g"]
    assert group.state.value == "Reconciling"
    assert owned_tps(b) == set()
    rb = h.ack(b)
    assert owned_tps(b) == set(), "still held by a until it acknowledges the revocation"
    ra = h.ack(a)  # a reports it owns only its three: revocation done -> epoch 2
    assert ra.member_epoch == 2
    h.ack(b)
    assert len(owned_tps(b)) == 3
    assert not owned_tps(a) & owned_tps(b)
    assert h.coordinator.consumer_groups["g"].state is ConsumerGroupState.STABLE


def test_leave_gives_the_partitions_to_the_remaining_member() -> None:
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"])
    h.join(b, ["t"])
    settle(h, [a, b])
    r = h.beat(b, epoch=-1)
    assert r.error is ErrorCode.NONE
    assert r.member_epoch == -1
    h.ack(a)
    assert owned_tps(a) == {("t", p) for p in range(6)}
    assert set(h.coordinator.consumer_groups["g"].members) == {a.member_id}


def test_session_timeout_fences_a_silent_member() -> None:
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"])
    h.join(b, ["t"])
    settle(h, [a, b])
    h.tick(40_000)
    h.ack(a)
    h.tick(10_000)  # b silent for 50 s > 45 s
    assert set(h.coordinator.consumer_groups["g"].members) == {a.member_id}
    h.ack(a)
    assert len(owned_tps(a)) == 6
    r = h.ack(b)
    assert r.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() -> None:
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"])
    h.ack(a)
    h.join(b, ["t"])
    h.beat(a)  # a learns of the revocation but never acknowledges it (owned not sent)
    h.tick(20_000)
    h.beat(a)
    h.ack(b)
    h.tick(11_000)  # 31 s after the revocation started > 30 s rebalance timeout
    assert a.member_id not in h.coordinator.consumer_groups["g"].members
    h.ack(b)
    assert len(owned_tps(b)) == 6


def test_wrong_epoch_is_fenced_and_unknown_member_rejected() -> None:
    h, a = CH(), Consumer()
    h.join(a, ["t"])
    assert h.beat(a, epoch=7).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert h.beat(Consumer("nobody", 1)).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.beat(Consumer("x", 1), group="other").error is ErrorCode.GROUP_ID_NOT_FOUND
    assert h.beat(a, epoch=-1, group="other").error is ErrorCode.UNKNOWN_MEMBER_ID


def test_previous_epoch_with_owned_partitions_it_still_has_is_accepted() -> None:
    """A lost response: the member retries with its old epoch; Kafka accepts it if what it
    owns is still assigned to it."""
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"])
    h.join(b, ["t"])
    settle(h, [a, b])
    epoch = a.epoch
    assert h.coordinator.consumer_groups["g"].members[a.member_id].previous_member_epoch == 1
    r = h.beat(a, epoch=1, owned=a.owned)
    assert r.error is ErrorCode.NONE
    assert r.member_epoch == epoch


def test_bad_requests_get_clear_errors() -> None:
    h = CH()
    assert h.beat(Consumer(), topics=None).error is ErrorCode.INVALID_REQUEST
    assert h.beat(Consumer(), topics=["t"], group="").error is ErrorCode.INVALID_REQUEST
    assert h.beat(Consumer(), topics=["t"], regex="t.*").error is ErrorCode.INVALID_REQUEST
    assert h.beat(Consumer(), topics=["t"], regex="").error is ErrorCode.NONE  # librdkafka's
    h.records.clear()
    del h.coordinator.consumer_groups["g"]
    r = h.beat(Consumer(), topics=["t"], assignor="sticky")
    assert r.error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert h.beat(Consumer("", 3), topics=["t"]).error is ErrorCode.INVALID_REQUEST
    assert h.beat(Consumer("m", -3)).error is ErrorCode.INVALID_REQUEST
    assert "g" not in h.coordinator.consumer_groups
    assert not h.records


def test_range_assignor_when_members_ask_for_it() -> None:
    h, a, b = CH(), Consumer("a"), Consumer("b")
    h.join(a, ["t", "u"], assignor="range")
    h.join(b, ["t", "u"], assignor="range")
    settle(h, [a, b])
    assert a.owned == {"t": [0, 1, 2], "u": [0]}
    assert b.owned == {"t": [3, 4, 5], "u": [1]}
    assert h.coordinator.describe_consumer_groups(["g"])[0].assignor == "range"


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_members_get_the_partitions_with_a_replica_in_their_rack(assignor: str) -> None:
    """KIP-881: the heartbeat's RackId and the replicas' racks reach the assignor, so each
    consumer can read from a follower in its own rack; a member moving rack is re-placed."""
    h = CH(racks={"t": [frozenset({r}) for r in "xyzxyz"]})
    a, b, c = Consumer("a"), Consumer("b"), Consumer("c")
    for consumer, rack in ((a, "x"), (b, "y"), (c, "z")):
        h.join(consumer, ["t"], assignor=assignor, rack=rack)
    settle(h, [a, b, c])
    assert (a.owned, b.owned, c.owned) == ({"t": [0, 3]}, {"t": [1, 4]}, {"t": [2, 5]})
    epoch = h.coordinator.consumer_groups["g"].group_epoch
    h.beat(a, owned=a.owned, rack="y")
    h.beat(b, owned=b.owned, rack="x")
    settle(h, [a, b, c])
    assert h.coordinator.consumer_groups["g"].group_epoch == epoch + 2
    assert (a.owned, b.owned) == ({"t": [1, 4]}, {"t": [0, 3]})
    assert h.replayed().consumer_groups["g"].members["a"].rack_id == "y"


def test_a_member_fenced_by_its_session_timeout_frees_partitions_rack_aware() -> None:
    """The session timer has no request at hand; the replica racks the heartbeats brought
    are still used, so the survivors end with the partitions of their own racks."""
    h = CH(racks={"t": [frozenset({r}) for r in "xyxyxy"]})
    a, b, d = Consumer("a"), Consumer("b"), Consumer("d")
    h.join(a, ["t"], rack="y")
    h.join(b, ["t"], rack="x")
    h.join(d, ["t"], rack="x")
    settle(h, [a, b, d])
    assert d.owned == {"t": [4, 5]}
    h.tick(30_000)  # d stops heartbeating; a and b beat within their session timeout
    h.ack(a)
    h.ack(b)
    h.tick(30_000)
    assert "d" not in h.coordinator.consumer_groups["g"].members
    settle(h, [a, b])
    assert (a.owned, b.owned) == ({"t": [1, 3, 5]}, {"t": [0, 2, 4]})


def test_new_partitions_bump_the_group_epoch_and_are_assigned() -> None:
    h, a = CH(), Consumer()
    h.join(a, ["t"])
    h.topics["t"] = 8
    r = h.ack(a)
    assert r.member_epoch == 2
    assert len(owned_tps(a)) == 8
    h.topics["new"] = 1
    h.beat(a, topics=["t", "new"], owned=a.owned)
    assert ("new", 0) in owned_tps(a)


def test_subscription_to_a_missing_topic_waits_for_it() -> None:
    h, a = CH(), Consumer()
    r = h.join(a, ["later"])
    assert r.assignment == {}
    h.topics["later"] = 2
    h.ack(a)
    assert owned_tps(a) == {("later", 0), ("later", 1)}


def test_static_member_restart_takes_over_the_assignment_without_rebalance() -> None:
    h, a, b = CH(), Consumer(), Consumer()
    h.join(a, ["t"], instance="i-a")
    h.join(b, ["t"])
    settle(h, [a, b])
    before, epoch = dict(a.owned), h.coordinator.consumer_groups["g"].group_epoch
    assert h.join(Consumer(), ["t"], instance="i-a").error is ErrorCode.UNRELEASED_INSTANCE_ID
    assert h.beat(a, epoch=-2).error is ErrorCode.NONE
    a2 = Consumer()
    r = h.join(a2, ["t"], instance="i-a")
    assert r.error is ErrorCode.NONE
    assert a2.owned == before
    group = h.coordinator.consumer_groups["g"]
    assert group.group_epoch == epoch
    assert a.member_id not in group.members


def test_classic_and_consumer_groups_do_not_mix() -> None:
    classic, h = Harness(), CH()
    h.coordinator = classic.coordinator
    rid = classic.join_new("cg", protocols=[("range", subscription("t"))])
    joined = classic.answers[rid]
    assert joined.error is ErrorCode.NONE
    r = h.join(Consumer(), ["t"], group="cg")
    assert r.error is ErrorCode.GROUP_ID_NOT_FOUND
    a = Consumer()
    h.join(a, ["t"])
    _, refused = classic.join("g", protocols=[("range", subscription("t"))])
    assert refused is not None
    assert refused.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # once empty, the id goes to whichever protocol joins next
    h.beat(a, epoch=-1)
    classic.join_new("g", protocols=[("range", subscription("t"))])
    assert "g" not in h.coordinator.consumer_groups
    assert h.coordinator.groups["g"].members


def test_offset_commit_uses_the_member_epoch_as_generation() -> None:
    h, a = CH(), Consumer()
    h.join(a, ["t"])
    co = h.coordinator

    def commit(member: str, epoch: int) -> ErrorCode:
        result = co.commit_offsets(
            group_id="g",
            member_id=member,
            group_instance_id=None,
            generation_id=epoch,
            offsets=[OffsetToCommit("t", 0, 42)],
            now_ms=h.now_ms,
        )
        h.records.extend(result.records)
        assert isinstance(result.response, list)
        errors = {e for _, e in result.response}
        assert len(errors) == 1
        return errors.pop()

    assert commit(a.member_id, a.epoch) is ErrorCode.NONE
    assert commit(a.member_id, a.epoch - 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert commit("stranger", a.epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert commit("", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # not while members are in
    fetched = co.fetch_offsets(group_id="g", partitions=None).response
    assert not isinstance(fetched, Pending)
    assert [(f.topic, f.partition, f.offset) for f in fetched.partitions] == [("t", 0, 42)]
    # offsets survive a restart, and stay with the consumer group
    fresh = h.replayed()
    assert "g" not in fresh.groups
    assert "g" in fresh.consumer_groups
    assert fresh.offsets["g"][TopicPartition("t", 0)].offset == 42


def test_list_describe_and_delete() -> None:
    h, a = CH(), Consumer()
    h.join(a, ["t"])
    listed = h.coordinator.list_groups()
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [
        ("g", "consumer", "Stable", "consumer")
    ]
    assert h.coordinator.list_groups(types_filter=["classic"]) == []
    d = h.coordinator.describe_consumer_groups(["g", "nope"])
    assert d[0].error is ErrorCode.NONE
    assert d[0].group_epoch == 1
    assert d[0].assignor == "uniform"
    assert d[0].members[0].assignment == {"t": [0, 1, 2, 3, 4, 5]}
    assert d[1].error is ErrorCode.GROUP_ID_NOT_FOUND
    classic = h.coordinator.describe_groups(["g"])[0]
    assert (classic.error, classic.state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    deleted = h.coordinator.delete_groups(group_ids=["g"], now_ms=0)
    assert deleted.response == [("g", ErrorCode.NON_EMPTY_GROUP)]
    h.beat(a, epoch=-1)
    assert h.coordinator.list_groups()[0].state == "Empty"
    deleted = h.coordinator.delete_groups(group_ids=["g"], now_ms=0)
    h.records.extend(deleted.records)
    assert deleted.response == [("g", ErrorCode.NONE)]
    assert h.coordinator.list_groups() == []
    assert "g" not in h.replayed().consumer_groups


@pytest.mark.parametrize("members", [1, 2, 3, 5])
def test_replay_rebuilds_the_live_state(members: int) -> None:
    h = CH()
    cs = [Consumer() for _ in range(members)]
    for c in cs:
        h.join(c, ["t", "u"])
    settle(h, cs, rounds=2)
    h.beat(cs[0], epoch=-1)
    h.ack(cs[-1])
    live = h.coordinator.consumer_groups["g"]
    again = h.replayed().consumer_groups["g"]
    assert (again.group_epoch, again.assignment_epoch, again.topics) == (
        live.group_epoch,
        live.assignment_epoch,
        live.topics,
    )
    assert again.members == live.members
    assert again.owners == live.owners


_names = st.text(min_size=0, max_size=8)
_psets = st.dictionaries(_names, st.sets(st.integers(0, 2**31 - 1), max_size=4), max_size=3).map(
    partition_set
)


@given(
    st.builds(
        ConsumerMemberValue,
        st.none() | _names,
        st.none() | _names,
        _names,
        _names,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | _names,
        st.lists(_names, max_size=3).map(tuple),
        st.integers(-2, 2**31 - 1),
        st.integers(-2, 2**31 - 1),
        st.sampled_from([0, 1, 2]),
        _psets,
        _psets,
        _psets,
    ),
    st.binary(max_size=64),
)
def test_member_records_round_trip_and_garbage_is_refused(
    value: ConsumerMemberValue, garbage: bytes
) -> None:
    """What a restart reads back is what was written; a corrupt value is a clear error."""
    key = ConsumerMemberKey("g", "m")
    raw = encode_value(value)
    assert raw is not None
    assert decode_value(decode_key(encode_key(key)), raw) == value
    with pytest.raises(GroupRecordError):
        decode_value(key, raw[: len(raw) - 1])
    try:
        decode_value(key, garbage)
        decode_value(ConsumerGroupKey("g"), garbage)
    except GroupRecordError:
        pass  # the only failure allowed
