"""Three in-process Raft replicas of `__cluster_metadata-0` over real 127.0.0.1 sockets.

Each node is a real Broker on its own data dir, its controller listener served by the real
`Connection` from the controller handler registry, its `RaftDriver` talking to the others through
`PeerPool`. Only the Raft part of a cluster node runs (the other parts have their own tests).

What the cluster relies on: a leader is elected; proposals commit on every node, in order, once;
stopping the leader elects another quickly (it resigns with EndQuorumEpoch); a restarted node
keeps its log and quorum state and catches up; DescribeQuorum and bad requests answer properly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import Entry, NotLeaderError, Role
from kafkapy.server.broker import Broker
from kafkapy.server.cluster.metadata_log import METADATA_TOPIC, read_quorum_state
from kafkapy.server.cluster.node import cluster_id_for
from kafkapy.server.cluster.peer import PeerClient, PeerPool
from kafkapy.server.cluster.raft_driver import RaftDriver
from kafkapy.server.config import BrokerConfig, ClusterConfig
from kafkapy.server.connection import Connection
from kafkapy.server.handlers import load_handlers
from kafkapy.testing.cluster import free_ports

pytestmark = pytest.mark.timeout(90)

STEP_S = 0.02


@dataclass
class RaftOnlyNode:
    """The slice of a ClusterNode the RaftDriver uses: its config and the voters' peers."""

    config: ClusterConfig
    controller_peers: PeerPool
    raft: RaftDriver | None = None
    applied: list[Entry] = field(default_factory=list)


@dataclass
class Member:
    node_id: int
    port: int
    data_dir: Path
    broker: Broker | None = None
    node: RaftOnlyNode | None = None
    scope: trio.CancelScope | None = None
    stopped: trio.Event = field(default_factory=trio.Event)

    @property
    def raft(self) -> RaftDriver:
        assert self.node is not None
        assert self.node.raft is not None
        return self.node.raft

    @property
    def applied(self) -> list[Entry]:
        assert self.node is not None
        return self.node.applied


OBSERVER_ID = 100


class Quorum:
    """Voters 1..size (combined broker+controller nodes) and one broker-only observer."""

    def __init__(self, tmp: Path, size: int = 3) -> None:
        ports = free_ports(size)
        self.voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        self.members = {i + 1: Member(i + 1, p, tmp / f"node{i + 1}") for i, p in enumerate(ports)}
        self.members[OBSERVER_ID] = Member(OBSERVER_ID, 0, tmp / "observer")

    async def start(self, nursery: trio.Nursery, node_id: int) -> None:
        member = self.members[node_id]
        observer = node_id == OBSERVER_ID
        config = BrokerConfig({
            "node.id": str(node_id),
            "process.roles": "broker" if observer else "broker,controller",
            "controller.quorum.voters": self.voters,
            "listeners": "PLAINTEXT://127.0.0.1:0" + ("" if observer else f",CONTROLLER://127.0.0.1:{member.port}"),
            "log.dirs": str(member.data_dir),
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "900",
            "controller.quorum.request.timeout.ms": "1000",
            "offsets.topic.num.partitions": "1",
        })
        broker = Broker(config)
        assert config.cluster is not None
        cluster = config.cluster
        broker.cluster_id = cluster_id_for(cluster)
        node = RaftOnlyNode(cluster, PeerPool(lambda nid: cluster.voters.get(nid), client_id=f"raft-test-{node_id}"))
        setattr(broker, "cluster", node)  # noqa: B010  (what ClusterNode does)
        node.raft = RaftDriver(broker, node)
        node.raft.subscribe(node.applied.extend)
        member.broker, member.node, member.stopped = broker, node, trio.Event()
        listeners = [] if observer else await trio.open_tcp_listeners(member.port, host="127.0.0.1")
        member.scope = await nursery.start(self._serve, member, listeners)

    async def _serve(self, member: Member, listeners: list[trio.SocketListener],
                     task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        assert member.broker is not None
        assert member.node is not None
        broker, node = member.broker, member.node
        try:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                async with trio.open_nursery() as inner:
                    for listener in listeners:
                        inner.start_soon(self._accept, broker, listener, inner)
                    inner.start_soon(self.raft_of(member).run)
        finally:
            with trio.CancelScope(shield=True):
                for listener in listeners:
                    await listener.aclose()
                await node.controller_peers.aclose()
                broker.close()
                member.stopped.set()

    @staticmethod
    def raft_of(member: Member) -> RaftDriver:
        return member.raft

    @staticmethod
    async def _accept(broker: Broker, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            stream = await listener.accept()
            nursery.start_soon(Connection(broker, stream, "CONTROLLER", "peer").run)

    async def stop(self, node_id: int) -> None:
        member = self.members[node_id]
        assert member.scope is not None
        member.scope.cancel()
        with trio.fail_after(10):
            await member.stopped.wait()

    def live(self) -> list[Member]:
        return [mb for mb in self.members.values() if mb.scope is not None and not mb.stopped.is_set()]

    async def wait_for(self, what: str, condition: Callable[[], bool], timeout_s: float = 15) -> None:
        for _ in range(int(timeout_s / STEP_S)):
            if condition():
                return
            await trio.sleep(STEP_S)
        raise AssertionError(f"timed out waiting for {what}")

    def voters_live(self) -> list[Member]:
        return [mb for mb in self.live() if mb.node_id != OBSERVER_ID]

    async def leader(self, timeout_s: float = 15) -> Member:
        def one_leader() -> bool:
            leaders = [mb for mb in self.live() if mb.raft.is_leader]
            return len(leaders) == 1 and all(
                mb.raft.leader_id == leaders[0].node_id for mb in self.live())
        await self.wait_for("one leader known to all", one_leader, timeout_s)
        return next(mb for mb in self.live() if mb.raft.is_leader)


@asynccontextmanager
async def quorum(tmp_path: Path) -> AsyncIterator[Quorum]:
    load_handlers()
    q = Quorum(tmp_path)
    async with trio.open_nursery() as nursery:
        for node_id in q.members:
            await q.start(nursery, node_id)
        try:
            yield q
        finally:
            for mb in q.live():
                await q.stop(mb.node_id)


async def _propose(q: Quorum, data: list[bytes]) -> int:
    """Propose through whoever leads (retrying across a change of leader); the last offset."""
    for _ in range(50):
        leader = await q.leader()
        try:
            offset = await leader.raft.propose(data)
            with trio.fail_after(10):
                await leader.raft.wait_committed(offset)
            return offset
        except NotLeaderError:
            await trio.sleep(0.1)
    raise AssertionError("no leader took the proposal")


def _records(entries: list[Entry]) -> list[bytes]:
    return [e.data for e in entries if e.data]


async def test_three_nodes_elect_commit_fail_over_and_restart(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        first = await q.leader()
        assert all(mb.raft.epoch == first.raft.epoch for mb in q.live())
        followers = [mb for mb in q.voters_live() if mb is not first]
        assert {mb.raft.role for mb in followers} == {Role.FOLLOWER}
        assert q.members[OBSERVER_ID].raft.role is Role.OBSERVER

        last = 0
        for i in range(10):
            last = await _propose(q, [b"rec-%d" % i, b"more-%d" % i])
        await q.wait_for("all nodes applied", lambda: all(len(mb.applied) > last for mb in q.live()))
        expected = [b"%s-%d" % (kind, i) for i in range(10) for kind in (b"rec", b"more")]
        for mb in q.live():
            assert _records(mb.applied) == expected
            assert [e.offset for e in mb.applied] == list(range(len(mb.applied)))  # once, in order
        assert read_quorum_state(first.raft.log.directory).leader_id == first.node_id

        # DescribeQuorum from the leader's controller listener
        client = PeerClient("127.0.0.1", first.port, client_id="describe")
        try:
            req = m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
                topic_name=METADATA_TOPIC, partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])])
            resp = await client.request(ApiKey.DESCRIBE_QUORUM, 1, req, timeout_s=10)
        finally:
            await client.aclose()
        (part,) = resp.topics[0].partitions
        assert part.error_code == ErrorCode.NONE
        assert part.leader_id == first.node_id
        assert part.high_watermark > last
        assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
        assert [o.replica_id for o in part.observers] == [OBSERVER_ID]
        assert all(v.log_end_offset > last for v in part.current_voters)

        # a clean stop of the leader: it resigns, another takes over well within a fetch timeout
        started = trio.current_time()
        await q.stop(first.node_id)
        second = await q.leader(timeout_s=10)
        assert second.node_id != first.node_id
        assert second.raft.epoch > first.raft.epoch
        took = trio.current_time() - started
        assert took < 5, f"fail-over took {took:.1f} s"
        after = await _propose(q, [b"after-failover"])
        await q.wait_for("live nodes applied", lambda: all(len(mb.applied) > after for mb in q.live()))
        assert len(q.live()) == 3  # two voters and the observer

        # the old leader restarts on its data: its log and quorum state are still there
        old_log_end = first.raft.log.end_offset()
        assert old_log_end > last
        async with trio.open_nursery() as nursery:
            await q.start(nursery, first.node_id)
            restarted = q.members[first.node_id]
            assert restarted.raft.log.end_offset() >= old_log_end
            assert restarted.raft.epoch >= first.raft.epoch
            final = await _propose(q, [b"after-restart"])
            await q.wait_for("restarted node caught up", lambda: len(restarted.applied) > final)
            assert _records(restarted.applied) == [*expected, b"after-failover", b"after-restart"]
            for mb in q.live():
                await q.stop(mb.node_id)


async def test_quorum_requests_with_bad_input_get_error_codes(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        leader = await q.leader()
        client = PeerClient("127.0.0.1", leader.port, client_id="bad")
        try:
            vote = m.VoteRequest(cluster_id="someone-else", topics=[m.VoteRequest.TopicData(
                topic_name=METADATA_TOPIC, partitions=[m.VoteRequest.PartitionData(candidate_epoch=99, candidate_id=2)])])
            resp = await client.request(ApiKey.VOTE, 0, vote, timeout_s=10)
            assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            fetch = m.FetchRequest(replica_id=2, topics=[m.FetchRequest.FetchTopic(
                topic_id=leader.raft.log.plog.topic_id, partitions=[m.FetchRequest.FetchPartition(partition=7)])])
            resp = await client.request(ApiKey.FETCH, 13, fetch, timeout_s=10)
            assert resp.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # an observer-style fetch from offset 0 gets the log from the start
            fetch = m.FetchRequest(replica_id=77, max_wait_ms=0, topics=[m.FetchRequest.FetchTopic(
                topic_id=leader.raft.log.plog.topic_id, partitions=[m.FetchRequest.FetchPartition(
                    partition=0, fetch_offset=0, last_fetched_epoch=0)])])
            resp = await client.request(ApiKey.FETCH, 13, fetch, timeout_s=10)
            (part,) = resp.responses[0].partitions
            assert part.error_code == ErrorCode.NONE
            assert part.current_leader.leader_id == leader.node_id
            assert part.records  # at least the leader's epoch-start entry
        finally:
            await client.aclose()
        assert leader.raft.is_leader  # the foreign vote did not disturb the quorum


async def test_leader_crash_without_resigning_elects_another(tmp_path: Path) -> None:
    """A leader that vanishes without EndQuorumEpoch (a crash): the followers notice after the
    fetch timeout and elect a new leader; the committed entries stay committed."""
    async with quorum(tmp_path) as q:
        offset = await _propose(q, [b"before-crash"])
        first = await q.leader()
        first.raft.resign_on_stop = False
        await q.stop(first.node_id)
        second = await q.leader(timeout_s=10)
        assert second.node_id != first.node_id
        after = await _propose(q, [b"after-crash"])
        assert after > offset
        await q.wait_for("live nodes applied", lambda: all(len(mb.applied) > after for mb in q.live()))
        for mb in q.live():
            assert _records(mb.applied) == [b"before-crash", b"after-crash"]
