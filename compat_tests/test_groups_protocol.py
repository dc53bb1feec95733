"""Group APIs on the wire, spoken with kafkapy's own codec over plain sockets.

Covers what the real clients in the other files do not exercise on purpose: the exact error
codes for bad commits (and that they change nothing), a JoinGroup storm from 200 members ending
in one rebalance, FindCoordinator's batched form and key types, JoinGroup v0 (no rebalance
timeout), an empty assignment from the leader, OffsetFetch for several groups, and the admin APIs.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

import pytest

from kafkapy.protocol import ApiKey, ErrorCode, RequestHeader, decode_response, encode_request
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)

E = ErrorCode
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer Subscription v0 of "t"


class Conn:
    """One socket; `send` and `recv` are split so requests can be pipelined."""

    _ids = itertools.count(1)

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.pending: list[tuple[int, int, int]] = []

    def send(self, api_key: ApiKey, version: int, msg: Any) -> None:
        corr = next(self._ids)
        frame = encode_request(RequestHeader(api_key, version, corr, "proto-test"), msg)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        self.pending.append((api_key, version, corr))

    def recv(self) -> Any:
        api_key, version, corr = self.pending.pop(0)
        size = struct.unpack(">i", self._read(4))[0]
        got, msg = decode_response(api_key, version, self._read(size))
        assert got == corr
        return msg

    def call(self, api_key: ApiKey, version: int, msg: Any) -> Any:
        self.send(api_key, version, msg)
        return self.recv()

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "broker closed the connection"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def join_request(group: str, member_id: str = "", **kw: Any) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=kw.pop("session_timeout_ms", 10_000),
        rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30_000), member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUB)], **kw,
    )


@pytest.fixture
def conn(broker: BrokerProcess) -> Any:
    c = Conn(broker.bootstrap)
    yield c
    c.close()


def make_topic(conn: Conn, name: str, partitions: int = 2) -> None:
    r = conn.call(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                    replication_factor=1)], timeout_ms=10_000))
    assert r.topics[0].error_code == E.NONE


def look_up_coordinator(conn: Conn, group: str) -> None:
    """What a client does before its first group request: FindCoordinator (which creates
    `__consumer_offsets` on first use) until the coordinator has loaded the group's partition.
    Before that, group requests answer NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, as Kafka's."""
    deadline = time.monotonic() + 30
    while True:
        found = conn.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group, key_type=0))
        if found.error_code == E.NONE:
            described = conn.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[group]))
            if described.groups[0].error_code == E.NONE:
                return
        assert time.monotonic() < deadline, f"no coordinator for group {group} within 30 s"
        time.sleep(0.05)


def join_one(conn: Conn, group: str) -> Any:
    look_up_coordinator(conn, group)
    first = conn.call(ApiKey.JOIN_GROUP, 5, join_request(group))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    joined = conn.call(ApiKey.JOIN_GROUP, 5, join_request(group, first.member_id))
    assert joined.error_code == E.NONE
    return joined


def commit(conn: Conn, group: str, topic: str, offset: int, generation: int, member: str) -> int:
    r = conn.call(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
        ])]))
    code: int = r.topics[0].partitions[0].error_code
    return code


def committed(conn: Conn, group: str, topic: str) -> int:
    r = conn.call(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    value: int = r.topics[0].partitions[0].committed_offset
    return value


def test_bad_commits_get_the_right_error_and_change_nothing(conn: Conn, topic_name: str) -> None:
    make_topic(conn, topic_name)
    group = f"bad-{topic_name}"
    joined = join_one(conn, group)
    me, gen = joined.member_id, joined.generation_id
    sync = conn.call(ApiKey.SYNC_GROUP, 5, SyncGroupRequest(
        group_id=group, generation_id=gen, member_id=me, protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=me, assignment=b"a")]))
    assert (sync.error_code, sync.assignment) == (E.NONE, b"a")
    assert commit(conn, group, topic_name, 5, gen, me) == E.NONE
    assert commit(conn, group, topic_name, 9, gen + 1, me) == E.ILLEGAL_GENERATION
    assert commit(conn, group, topic_name, 9, gen, "intruder") == E.UNKNOWN_MEMBER_ID
    assert commit(conn, group, topic_name, 9, -1, "") == E.UNKNOWN_MEMBER_ID
    assert committed(conn, group, topic_name) == 5
    assert commit(conn, group, "no-such-topic-x", 9, gen, me) == E.UNKNOWN_TOPIC_OR_PARTITION
    hb = conn.call(ApiKey.HEARTBEAT, 4, HeartbeatRequest(
        group_id=group, generation_id=gen + 3, member_id=me))
    assert hb.error_code == E.ILLEGAL_GENERATION
    bad_sync = conn.call(ApiKey.SYNC_GROUP, 5, SyncGroupRequest(
        group_id=group, generation_id=gen, member_id=me, protocol_type="consumer",
        protocol_name="roundrobin"))
    assert bad_sync.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_storm_of_200_members_is_one_rebalance(broker: BrokerProcess) -> None:
    group = "storm"
    conns = [Conn(broker.bootstrap) for _ in range(200)]
    try:
        look_up_coordinator(conns[0], group)
        for c in conns:
            c.send(ApiKey.JOIN_GROUP, 5, join_request(group))
        ids = []
        for c in conns:
            r = c.recv()
            assert r.error_code == E.MEMBER_ID_REQUIRED
            ids.append(r.member_id)
        for c, member_id in zip(conns, ids, strict=True):
            c.send(ApiKey.JOIN_GROUP, 5, join_request(group, member_id))
        answers = [c.recv() for c in conns]
        assert {a.error_code for a in answers} == {E.NONE}
        assert {a.generation_id for a in answers} == {1}  # one rebalance, not 200
        leaders = [a for a in answers if a.member_id == a.leader]
        assert len(leaders) == 1
        assert {m.member_id for m in leaders[0].members} == set(ids)
    finally:
        for c in conns:
            c.close()


def test_find_coordinator_forms_and_key_types(conn: Conn, broker: BrokerProcess) -> None:
    port = int(broker.bootstrap.rsplit(":", 1)[1])
    batched = conn.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=0, coordinator_keys=["g1", "g2"]))
    assert [(c.key, c.error_code, c.port) for c in batched.coordinators] == [
        ("g1", E.NONE, port), ("g2", E.NONE, port)]
    txn = conn.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=1, coordinator_keys=["tx"]))
    assert txn.coordinators[0].error_code == E.NONE
    assert txn.coordinators[0].node_id == batched.coordinators[0].node_id
    bad = conn.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=7, coordinator_keys=["x"]))
    assert bad.coordinators[0].error_code == E.INVALID_REQUEST
    single = conn.call(ApiKey.FIND_COORDINATOR, 0, FindCoordinatorRequest(key="g1"))
    assert (single.error_code, single.port) == (E.NONE, port)


def test_join_group_v0_defaults_and_empty_assignment(conn: Conn) -> None:
    look_up_coordinator(conn, "old-client")
    r = conn.call(ApiKey.JOIN_GROUP, 0, join_request("old-client"))
    assert r.error_code == E.NONE  # no MEMBER_ID_REQUIRED round before v4
    assert r.generation_id == 1
    assert r.leader == r.member_id
    s = conn.call(ApiKey.SYNC_GROUP, 0, SyncGroupRequest(
        group_id="old-client", generation_id=1, member_id=r.member_id, assignments=[]))
    assert (s.error_code, s.assignment) == (E.NONE, b"")
    described = conn.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["old-client"]))
    assert described.groups[0].group_state == "Stable"


def test_offset_fetch_for_several_groups(conn: Conn, topic_name: str) -> None:
    make_topic(conn, topic_name)
    for group in ("fetch-a", "fetch-b", "fetch-none"):
        look_up_coordinator(conn, group)
    assert commit(conn, "fetch-a", topic_name, 11, -1, "") == E.NONE
    assert commit(conn, "fetch-b", topic_name, 22, -1, "") == E.NONE
    groups = [
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopics(name=topic_name, partition_indexes=[0, 1])])
        for g in ("fetch-a", "fetch-b", "fetch-none")
    ]
    r = conn.call(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(groups=groups, require_stable=True))
    got = {g.group_id: [p.committed_offset for t in g.topics for p in t.partitions] for g in r.groups}
    assert got == {"fetch-a": [11, -1], "fetch-b": [22, -1], "fetch-none": [-1, -1]}
    everything = conn.call(ApiKey.OFFSET_FETCH, 8, OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id="fetch-a", topics=None)]))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.groups[0].topics] == [
        (topic_name, [0])]


def test_list_describe_delete(conn: Conn, topic_name: str) -> None:
    make_topic(conn, topic_name)
    live = f"live-{topic_name}"
    join_one(conn, live)
    look_up_coordinator(conn, f"idle-{topic_name}")
    look_up_coordinator(conn, "missing-group")
    assert commit(conn, f"idle-{topic_name}", topic_name, 3, -1, "") == E.NONE
    listed = conn.call(ApiKey.LIST_GROUPS, 5, ListGroupsRequest(states_filter=["CompletingRebalance"]))
    assert live in {g.group_id for g in listed.groups}
    assert all(g.group_state == "CompletingRebalance" for g in listed.groups)
    assert all(g.group_type == "classic" for g in listed.groups)
    d = conn.call(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[live, "missing-group"]))
    assert [(g.group_id, g.group_state) for g in d.groups] == [
        (live, "CompletingRebalance"), ("missing-group", "Dead")]
    deleted = conn.call(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(
        groups_names=[live, f"idle-{topic_name}", "missing-group"]))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (live, E.NON_EMPTY_GROUP), (f"idle-{topic_name}", E.NONE), ("missing-group", E.GROUP_ID_NOT_FOUND)]
    assert committed(conn, f"idle-{topic_name}", topic_name) == -1
