"""Replica fetchers in fetch sessions (KIP-227): an idle follower's requests stay incremental,
and replication carries on across a session the leader evicted and across a leader change."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest
from kafkapy.replication.follower_session import FollowerSession
from tests.server.cluster.replication_helpers import Node, produce, running_cluster, wait_for
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(120)


def _leader_of(controller: object, nodes: dict[int, Node], partition: int = 0) -> Node:
    return nodes[controller.image.topics["t"].partitions[partition].leader]  # type: ignore[attr-defined]


def _session(follower: Node, leader: Node) -> FollowerSession | None:
    return follower.cluster.fetchers.sessions.get(leader.node_id)  # type: ignore[no-any-return]


async def _in_session(follower: Node, leader: Node, *, past_epoch: int = 2) -> FollowerSession:
    """Wait until `follower` fetches from `leader` incrementally (an open session)."""
    def open_session() -> bool:
        s = _session(follower, leader)
        return s is not None and s.session_id != 0 and s.epoch > past_epoch

    await wait_for(open_session, what=f"node {follower.node_id}'s session with {leader.node_id}")
    session = _session(follower, leader)
    assert session is not None
    return session


def _all_in_sessions(node: Node) -> bool:
    """Every leader `node` follows a partition of has an open session with it."""
    fetchers = node.cluster.fetchers
    leaders = {state.leader for state in fetchers.partitions.values()}
    return all((s := fetchers.sessions.get(leader)) is not None and s.epoch > 2 for leader in leaders)


async def _replicated(nodes: dict[int, Node], leader: Node, payload: bytes) -> None:
    """acks=all to `leader`, then every node holds the leader's log byte for byte."""
    client = await leader.client()
    answer = await produce(client, "t", batch(payload), acks=-1)
    await client.aclose()
    assert answer.error_code == ErrorCode.NONE
    source = leader.broker.logs.get("t", 0)
    assert source is not None

    def same() -> bool:
        copies = [n.broker.logs.get("t", 0) for n in nodes.values() if not n.stopped]
        return all(c is not None and c.read_bytes(0, 1 << 20) == source.read_bytes(0, 1 << 20) for c in copies)

    await wait_for(same, what="every replica to hold the leader's log")


async def test_idle_followers_stay_in_their_session_and_survive_an_eviction(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            leader = _leader_of(controller, nodes)
            follower = next(n for i, n in nodes.items() if i != leader.node_id)
            await _replicated(nodes, leader, b"before")
            session = await _in_session(follower, leader)
            full, fetches = session.full_requests, follower.cluster.fetchers.fetches
            await wait_for(lambda: follower.cluster.fetchers.fetches >= fetches + 5, what="more fetches")
            assert session.full_requests == full  # idle: incremental requests only
            old_id = session.session_id
            assert leader.broker.fetch_sessions.remove(old_id) is not None  # evicted on the leader
            await _replicated(nodes, leader, b"after-eviction")
            session = await _in_session(follower, leader, past_epoch=1)
            assert session.session_id != old_id
            assert session.resets >= 1  # FETCH_SESSION_ID_NOT_FOUND started a new one
            assert follower.node_id in controller.image.topics["t"].partitions[0].isr


async def test_followers_open_a_session_with_a_new_leader(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            old = _leader_of(controller, nodes)
            await _replicated(nodes, old, b"first")
            for n in nodes.values():
                if n is not old:
                    await _in_session(n, old)
            await old.stop()
            controller.fence(old.node_id)
            new = _leader_of(controller, nodes)
            assert new.node_id != old.node_id
            follower = next(n for i, n in nodes.items() if i not in (old.node_id, new.node_id))
            await _replicated(nodes, new, b"second")
            await _in_session(follower, new)
            await wait_for(lambda: _session(follower, old) is None, what="the session with the old leader to end")


async def test_followers_keep_their_sessions_when_the_cache_is_full(tmp_path: Path) -> None:
    """One slot: a consumer's session cannot push the followers back to full fetches."""
    with trio.fail_after(90):
        async with running_cluster(tmp_path, **{"max.incremental.fetch.session.cache.slots": "1"}) as (
            controller, nodes,
        ):
            controller.create_topic("t", rf=3)
            leader = _leader_of(controller, nodes)
            await _replicated(nodes, leader, b"x")
            client = await leader.client()
            consumer = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=0,
                                    topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                                        FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                    partition_max_bytes=1 << 20)])])
            answer = await client.request(ApiKey.FETCH, 12, consumer)
            await client.aclose()
            assert answer.session_id == 0  # the followers hold the cache: no slot for a consumer
            for n in nodes.values():
                if n is not leader:
                    await _in_session(n, leader)
            assert len(leader.broker.fetch_sessions) == 2


async def test_idle_partitions_cost_the_leader_no_reports_and_stay_in_the_isr(tmp_path: Path) -> None:
    """Idle partitions of a follower's session are neither read nor reported per fetch, and
    an append after an idle spell longer than replica.lag.time.max.ms (1.5 s here) shrinks no
    ISR: the follower counts as caught up as of its latest request."""
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", partitions=4, rf=3)
            leader = _leader_of(controller, nodes)
            await _replicated(nodes, leader, b"warm")
            await wait_for(lambda: all(_all_in_sessions(n) for n in nodes.values()), what="open sessions")
            reports: list[int] = []
            original = leader.broker.replicas.on_follower_fetch

            def counted(*args: object, **kwargs: object) -> None:
                reports.append(1)
                original(*args, **kwargs)  # type: ignore[arg-type]

            leader.broker.replicas.on_follower_fetch = counted  # type: ignore[method-assign]
            alters = controller.alter_requests
            fetches = sum(n.cluster.fetchers.fetches for n in nodes.values())
            await trio.sleep(3.0)  # idle: twice the lag time
            assert sum(n.cluster.fetchers.fetches for n in nodes.values()) > fetches + 4
            assert reports == []
            await _replicated(nodes, leader, b"after-idle")
            assert reports  # the moved partition is reported again
            await trio.sleep(1.0)
            assert controller.alter_requests == alters  # no shrink, no expansion
            assert all(len(p.isr) == 3 for p in controller.image.topics["t"].partitions.values())
