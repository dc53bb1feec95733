"""Producer state on followers: a replica that becomes leader must know every producer's last
sequences and open transactions as of its log (Kafka keeps the state on followers as they
append, truncate and restart), or an idempotent producer fails with OUT_OF_ORDER_SEQUENCE_NUMBER
right after a failover and read_committed readers see uncommitted data."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    ProduceRequest,
    ProduceResponse,
)
from kafkapy.protocol.messages.produce import ProduceResponse_PartitionProduceResponse
from kafkapy.protocol.records import Record, build_batch
from kafkapy.storage import PartitionLog
from tests.server.cluster.replication_helpers import (
    MiniController,
    Node,
    produce,
    running_cluster,
    wait_for,
)
from tests.server.helpers import Client

pytestmark = pytest.mark.timeout(120)

PID = 4242
READ_COMMITTED = 1


def pid_batch(seq: int, count: int = 2, *, transactional: bool = False, pid: int = PID) -> bytes:
    records = [Record(i, 0, None, b"v%d" % (seq + i), []) for i in range(count)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=transactional)


def _leader(controller: MiniController, nodes: dict[int, Node]) -> Node:
    return nodes[controller.image.topics["t"].partitions[0].leader]


def _log(node: Node) -> PartitionLog:
    plog = node.broker.logs.get("t", 0)
    assert plog is not None
    return plog


async def _read_committed_fetch(node: Node) -> None:
    """A read_committed Fetch (as a consumer with stale metadata sends to a follower): it
    answers NOT_LEADER_OR_FOLLOWER, after the follower looked at the partition's state."""
    topic_id = node.broker.topics.get("t").topic_id  # type: ignore[union-attr]
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=READ_COMMITTED, session_id=0, session_epoch=-1,
                       topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
                           FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                       partition_max_bytes=1 << 20)])])
    client = await node.client()
    try:
        await client.request(ApiKey.FETCH, 13, req)
    finally:
        await client.aclose()


async def _caught_up(nodes: dict[int, Node], leader: Node) -> None:
    end = _log(leader).log_end_offset
    await wait_for(lambda: all(_log(n).log_end_offset == end for n in nodes.values()),
                   what="followers to catch up")


async def _fail_over(controller: MiniController, nodes: dict[int, Node], old: Node) -> Node:
    await old.stop()
    controller.fence(old.node_id)
    new = _leader(controller, nodes)
    assert new.node_id != old.node_id
    return new


async def test_a_new_leader_accepts_the_next_sequence_after_failover(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            old = _leader(controller, nodes)
            client = await old.client()
            assert (await produce(client, "t", pid_batch(0))).error_code == ErrorCode.NONE
            await _caught_up(nodes, old)
            for node in nodes.values():
                if node is not old:
                    await _read_committed_fetch(node)
            for seq in (2, 4):
                assert (await produce(client, "t", pid_batch(seq))).error_code == ErrorCode.NONE
            await _caught_up(nodes, old)
            await client.aclose()
            new = await _fail_over(controller, nodes, old)
            client = await new.client()
            retry = await produce(client, "t", pid_batch(4))  # the last batch again: a duplicate
            assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 4)
            following = await produce(client, "t", pid_batch(6))
            assert (following.error_code, following.base_offset) == (ErrorCode.NONE, 6)
            await client.aclose()


async def _produce_transactional(client: Client, records: bytes) -> ProduceResponse_PartitionProduceResponse:
    req = ProduceRequest(transactional_id="txn", acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])
    response = await client.request(ApiKey.PRODUCE, 9, req)
    assert isinstance(response, ProduceResponse)
    return response.responses[0].partition_responses[0]


async def _latest_committed_offset(node: Node) -> int:
    client: Client = await node.client()
    try:
        req = ListOffsetsRequest(replica_id=-1, isolation_level=READ_COMMITTED, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        response = await client.request(ApiKey.LIST_OFFSETS, 5, req)
    finally:
        await client.aclose()
    part = response.topics[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    return int(part.offset)


async def test_a_new_leader_keeps_an_open_transaction_out_of_read_committed(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            old = _leader(controller, nodes)
            client = await old.client()
            assert (await produce(client, "t", pid_batch(0, pid=7))).error_code == ErrorCode.NONE
            await _caught_up(nodes, old)
            for node in nodes.values():
                if node is not old:
                    await _read_committed_fetch(node)
            opened = await _produce_transactional(client, pid_batch(0, transactional=True))
            assert (opened.error_code, opened.base_offset) == (ErrorCode.NONE, 2)
            assert (await produce(client, "t", pid_batch(2, pid=7))).error_code == ErrorCode.NONE
            await _caught_up(nodes, old)
            await client.aclose()
            new = await _fail_over(controller, nodes, old)
            await wait_for(lambda: _log(new).high_watermark == 6, what="the new leader's HW")
            # the transaction opened at offset 2 has no marker: read_committed stops there
            assert await _latest_committed_offset(new) == 2


async def test_a_follower_whose_state_load_fails_keeps_replicating_and_loads_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """The failure is logged and the fetchers go on (it does not take the replica fetcher
    manager down for the node's supervisor to restart); the next producer batch loads it."""
    from kafkapy.broker import idempotence

    real = idempotence.load_state
    failures = [RuntimeError("unexpected")]
    follower_dirs: list[Path] = []

    def flaky(plog: PartitionLog, *args: Any) -> Any:
        if failures and any(d in plog.directory.parents for d in follower_dirs):
            raise failures.pop()  # the first load on a follower
        return real(plog, *args)

    monkeypatch.setattr(idempotence, "load_state", flaky)
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            leader = _leader(controller, nodes)
            follower_dirs.extend(tmp_path / f"node{i}" for i in nodes if i != leader.node_id)
            client = await leader.client()
            for seq in (0, 2, 4):
                assert (await produce(client, "t", pid_batch(seq))).error_code == ErrorCode.NONE
                await _caught_up(nodes, leader)
            await client.aclose()
            assert failures == []
            followers = [n for n in nodes.values() if n is not leader]
            await wait_for(lambda: all(
                n.broker.producer_states.loaded(("t", 0), _log(n)) is not None for n in followers
            ), what="the followers' producer state")
            for n in followers:
                mgr = n.broker.producer_states.loaded(("t", 0), _log(n))
                assert mgr is not None
                assert mgr.entry(PID).last_seq == 5  # type: ignore[union-attr]
            messages = [r.getMessage() for r in caplog.records]
            assert any("loading producer state failed" in m for m in messages)
            assert not any(m.startswith("cluster part") for m in messages)
