"""A `__consumer_offsets` append that fails in a running broker: the client gets Kafka's error
code, the state stays what the log holds (also after a restart), and the broker carries on.

The failure is real, at the storage boundary: the active segment's file descriptor is swapped
for a read-only one of the same file (what a disk remounted read-only does to writes), so the
log's own append hits the OS error; swapping the original back "repairs the disk".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafkapy.server.broker import Broker
from tests.server.helpers import Client, create_topic, find_coordinator, running_broker

E = ErrorCode
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer Subscription v0 of "t"
SUB_TU = b"\x00\x00\x00\x00\x00\x02\x00\x01t\x00\x01u\x00\x00\x00\x00"


@contextmanager
def read_only_disk(broker: Broker) -> Iterator[None]:
    """Writes to `__consumer_offsets-0` fail with an OS error until the block ends."""
    plog = broker.partition_log(CONSUMER_OFFSETS_TOPIC, 0)
    assert plog is not None
    fd = plog.segments[-1].fd
    saved = os.dup(fd)
    read_only = os.open(plog.segments[-1].log_path, os.O_RDONLY)
    try:
        os.dup2(read_only, fd)
        yield
    finally:
        os.close(read_only)
        os.dup2(saved, fd)
        os.close(saved)


async def commit(c: Client, offset: int, *, group: str = "g", member: str = "",
                 generation: int = -1, metadata: str = "") -> int:
    r = await c.request(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_metadata=metadata)])]))
    code: int = r.topics[0].partitions[0].error_code
    return code


async def committed(c: Client, group: str = "g") -> int:
    r = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
        group_id=group,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
    offset: int = r.topics[0].partitions[0].committed_offset
    return offset


async def join(c: Client, member: str = "", metadata: bytes = SUB, *, session_ms: int = 10_000,
               group: str = "live") -> tuple[int, int, str]:
    """JoinGroup v3 (no MEMBER_ID_REQUIRED round); returns (error, generation, member id)."""
    r = await c.request(ApiKey.JOIN_GROUP, 3, JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10_000,
        member_id=member, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)]))
    return r.error_code, r.generation_id, r.member_id


async def sync(c: Client, member: str, generation: int, assignment: bytes) -> int:
    r = await c.request(ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
        group_id="live", generation_id=generation, member_id=member,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=assignment)]))
    code: int = r.error_code
    return code


async def heartbeat(c: Client, member: str, generation: int) -> int:
    r = await c.request(ApiKey.HEARTBEAT, 3, HeartbeatRequest(
        group_id="live", generation_id=generation, member_id=member))
    code: int = r.error_code
    return code


async def group_state(c: Client) -> str:
    d = await c.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["live"]))
    state: str = d.groups[0].group_state
    return state


async def test_failed_commit_is_not_visible_and_not_lost_by_restart(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (broker, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            await create_topic(port, "t", 1)
            assert await commit(c, 5) == E.NONE
            with read_only_disk(broker):
                assert await commit(c, 9) == E.NOT_COORDINATOR  # Kafka's code: look us up again
                assert await committed(c) == 5
                assert await commit(c, 10, group="fresh") == E.NOT_COORDINATOR
                assert await committed(c, "fresh") == -1
            assert await committed(c) == 5  # the broker stayed up and serves the logged offset
            await c.aclose()
        async with running_broker(tmp_path) as (broker, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            assert await committed(c) == 5  # what OffsetFetch showed is what the log has
            assert await commit(c, 11) == E.NONE  # the disk is back: commits work again
            assert await committed(c) == 11
            await c.aclose()


async def test_failed_group_metadata_writes_answer_not_coordinator(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (broker, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "live")
            error, generation, member = await join(c)
            assert (error, generation) == (E.NONE, 1)
            assert await sync(c, member, 1, b"mine") == E.NONE
            with read_only_disk(broker):
                # new metadata -> the join completes at once and writes generation 2: fails
                assert (await join(c, member, SUB_TU))[0] == E.NOT_COORDINATOR
            # generation 2 never reached the log, so it does not exist: the group rebalances
            # from generation 1 and every member must rejoin
            assert await group_state(c) == "PreparingRebalance"
            assert await heartbeat(c, member, 1) == E.REBALANCE_IN_PROGRESS
            error, generation, _ = await join(c, member, SUB_TU)
            assert (error, generation) == (E.NONE, 2)
            with read_only_disk(broker):
                assert await sync(c, member, 2, b"new") == E.NOT_COORDINATOR
            assert await group_state(c) == "PreparingRebalance"
            error, generation, _ = await join(c, member, SUB_TU)
            assert (error, generation) == (E.NONE, 3)
            assert await sync(c, member, 3, b"new") == E.NONE
            assert await group_state(c) == "Stable"
            await c.aclose()


async def test_group_configs_are_honoured(tmp_path: Path) -> None:
    settings = {
        "group.max.size": "1",
        "offset.metadata.max.bytes": "8",
        "group.min.session.timeout.ms": "7000",
        "group.max.session.timeout.ms": "8000",
        "offsets.retention.check.interval.ms": "250",
    }
    with trio.fail_after(60):
        async with running_broker(tmp_path, **settings) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            await create_topic(port, "t", 1)
            assert await commit(c, 1, metadata="x" * 9) == E.OFFSET_METADATA_TOO_LARGE
            assert await committed(c) == -1
            assert await commit(c, 1, metadata="x" * 8) == E.NONE
            assert (await join(c, session_ms=6999))[0] == E.INVALID_SESSION_TIMEOUT
            assert (await join(c, session_ms=8001))[0] == E.INVALID_SESSION_TIMEOUT
            error, _, _ = await join(c, session_ms=7500)
            assert error == E.NONE
            other = await Client.connect(port)
            assert (await join(other, session_ms=7500))[0] == E.GROUP_MAX_SIZE_REACHED
            # offsets.retention.check.interval.ms: a v2 commit kept for 100 ms is gone after the
            # next check, 250 ms apart here (the default checks every 10 minutes)
            r = await c.request(ApiKey.OFFSET_COMMIT, 2, OffsetCommitRequest(
                group_id="short", generation_id_or_member_epoch=-1, retention_time_ms=100,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=3)])]))
            assert r.topics[0].partitions[0].error_code == E.NONE
            assert await committed(c, "short") == 3
            for _ in range(40):  # bounded: 40 x 50 ms
                if await committed(c, "short") == -1:
                    break
                await trio.sleep(0.05)
            assert await committed(c, "short") == -1
            await other.aclose()
            await c.aclose()


async def test_describe_groups_authorized_operations(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "live")
            assert (await join(c))[0] == E.NONE
            asked = await c.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
                groups=["live", "unknown"], include_authorized_operations=True))
            # READ (3), DELETE (6), DESCRIBE (8), DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11): all a
            # group supports, as without an authorizer
            everything = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
            assert [g.authorized_operations for g in asked.groups] == [everything] * 2
            for version in (3, 5):
                plain = await c.request(ApiKey.DESCRIBE_GROUPS, version,
                                        DescribeGroupsRequest(groups=["live"]))
                assert plain.groups[0].authorized_operations == -(2**31)
            await c.aclose()
