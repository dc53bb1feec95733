"""The group driver in a running broker: `__consumer_offsets` is the state, reloaded at start.

Real sockets on 127.0.0.1:0 and our own codec (tests/server/helpers.py); the broker restarts on
the same data dir to check what comes back from the log.
"""

from __future__ import annotations

import time
from pathlib import Path

import trio

from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeGroupsRequest,
    JoinGroupRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from kafkapy.protocol.records import build_control_batch
from tests.server.helpers import Client, create_topic, find_coordinator, running_broker

E = ErrorCode


async def txn_commit(c: Client, pid: int, offset: int) -> int:
    r = await c.request(ApiKey.TXN_OFFSET_COMMIT, 3, TxnOffsetCommitRequest(
        transactional_id="tx", group_id="g", producer_id=pid, producer_epoch=0,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="t", partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset)])]))
    code: int = r.topics[0].partitions[0].error_code
    return code


async def fetch(c: Client, require_stable: bool) -> tuple[int, int]:
    r = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
        group_id="g", require_stable=require_stable,
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
    p = r.topics[0].partitions[0]
    return p.committed_offset, p.error_code


async def test_transactional_offsets_follow_markers_across_restart(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (broker, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            await create_topic(port, "t", 1)
            assert await txn_commit(c, 5, 40) == E.NONE
            assert await fetch(c, True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
            assert await fetch(c, False) == (-1, E.NONE)
            driver = await broker.group_coordinator.ready()
            plog = broker.partition_log(CONSUMER_OFFSETS_TOPIC, 0)
            assert plog is not None
            # what the transaction marker writer does: append the marker, tell the driver
            plog.append(build_control_batch(True, producer_id=5, producer_epoch=0,
                                            coordinator_epoch=0, timestamp_ms=int(time.time() * 1000)),
                        now_ms=int(time.time() * 1000), from_client=False)
            driver.on_transaction_marker(5, commit=True)
            assert await fetch(c, True) == (40, E.NONE)
            assert await txn_commit(c, 6, 99) == E.NONE  # never committed
            await c.aclose()
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "g")
            assert await fetch(c, False) == (40, E.NONE)
            assert await fetch(c, True) == (-1, E.UNSTABLE_OFFSET_COMMIT)  # 6 still open
            await c.aclose()


async def test_group_generation_and_assignment_reload(tmp_path: Path) -> None:
    sub = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "live")
            j = await c.request(ApiKey.JOIN_GROUP, 3, JoinGroupRequest(
                group_id="live", session_timeout_ms=6000, rebalance_timeout_ms=6000,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=sub)]))
            assert (j.error_code, j.generation_id) == (E.NONE, 1)
            s = await c.request(ApiKey.SYNC_GROUP, 3, SyncGroupRequest(
                group_id="live", generation_id=1, member_id=j.member_id,
                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=j.member_id, assignment=b"mine")]))
            assert s.error_code == E.NONE
            await c.aclose()
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            await find_coordinator(c, "live")
            d = await c.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["live"]))
            g = d.groups[0]
            assert g.group_state == "Stable"
            assert [(m.member_id, m.member_assignment) for m in g.members] == [(j.member_id, b"mine")]
            assert g.members[0].member_metadata == sub
            await c.aclose()
