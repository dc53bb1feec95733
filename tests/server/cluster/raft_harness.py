"""An in-process Raft quorum for tests and perf/raft_bench.py: voters 1..N (combined nodes) and
one broker-only observer, each a real Broker on its own data dir with its controller listener
served by the real `Connection` from the controller handler registry and its `RaftDriver`
talking to the others through `PeerPool`. Only the Raft part of a cluster node runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import trio

from kafkapy.broker.config import BrokerConfig, ClusterConfig
from kafkapy.broker.handlers import load_handlers
from kafkapy.raft import Entry, NotLeaderError
from kafkapy.server.broker import Broker
from kafkapy.server.cluster.peer import PeerPool
from kafkapy.server.cluster.raft_driver import SNAPSHOT_BYTES_CONFIG, RaftDriver
from kafkapy.server.connection import Connection
from kafkapy.testing.cluster import free_ports

STEP_S = 0.02


@dataclass
class RaftOnlyNode:
    """The slice of a ClusterNode the RaftDriver uses: its config and the voters' peers."""

    config: ClusterConfig
    controller_peers: PeerPool
    raft: RaftDriver | None = None
    #: no controller channel and no controller: the broker's request ports name them
    channel: None = None
    controller: None = None
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
#: short Raft timeouts so tests elect and fail over in about a second
FAST_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "900",
    "controller.quorum.request.timeout.ms": "1000",
}


class Quorum:
    """Voters 1..size (combined broker+controller nodes) and one broker-only observer."""

    def __init__(self, tmp: Path, size: int = 3, settings: Mapping[str, str] | None = None) -> None:
        self.settings = dict(FAST_TIMEOUTS if settings is None else settings)
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
            "offsets.topic.num.partitions": "1",
            **self.settings,
        })
        broker = Broker(config)
        assert config.cluster is not None
        cluster = config.cluster
        node = RaftOnlyNode(cluster, PeerPool(lambda nid: cluster.voters.get(nid), client_id=f"raft-test-{node_id}"))
        # the node is only its Raft replica (the tests append raw bytes no publisher could
        # apply): the quorum handlers find the driver through broker.cluster
        broker._node = cast(Any, node)
        node.raft = RaftDriver(
            cluster,
            broker.logs,
            node.controller_peers,
            cluster_id=broker.cluster_id,
            snapshot_bytes=config.get_int(SNAPSHOT_BYTES_CONFIG),
        )
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
async def quorum(tmp_path: Path, settings: Mapping[str, str] | None = None) -> AsyncIterator[Quorum]:
    load_handlers()
    q = Quorum(tmp_path, settings=settings)
    async with trio.open_nursery() as nursery:
        for node_id in q.members:
            await q.start(nursery, node_id)
        try:
            yield q
        finally:
            for mb in q.live():
                await q.stop(mb.node_id)


async def propose(q: Quorum, data: list[bytes]) -> int:
    """Propose through whoever leads (retrying across a change of leader); the last offset,
    once committed."""
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
