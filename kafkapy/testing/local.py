"""open_cluster: N cluster-mode nodes inside one trio run (for fast server tests).

Why in-process as well as `ClusterProcesses`: a test that only needs a formed cluster (metadata,
topic creation, the controller listener) should not pay three interpreter start-ups, and an
in-process node can be inspected directly (`broker.cluster.image`, `broker.cluster.raft`).
Crash behaviour (SIGKILL, restart from disk) stays with the subprocess harness.

Each node is a real `Broker` + `Server` on 127.0.0.1 with its own data dir under `base_dir`; the
controller ports are picked up front so every node gets the full voter list; broker listeners
use port 0. The block starts once every node is ready and every node's image holds all brokers
unfenced (an image may lag the others' joins by a publish). Nodes stop cleanly (SIGTERM path: `request_shutdown`) when the block exits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from kafkapy.broker.config import BrokerConfig
from kafkapy.server.app import BoundListener, Server
from kafkapy.server.broker import Broker
from kafkapy.testing.cluster import TEST_OVERRIDES, free_ports

__all__ = ["LocalNode", "open_cluster"]

STOP_TIMEOUT_S = 15.0


@dataclass
class LocalNode:
    node_id: int
    broker: Broker
    server: Server
    bound: list[BoundListener]

    @property
    def broker_port(self) -> int:
        return next(b.port for b in self.bound if b.listener.name == "PLAINTEXT")

    @property
    def controller_port(self) -> int:
        return next(b.port for b in self.bound if b.listener.name == "CONTROLLER")


def _sees_all(node: LocalNode, count: int) -> bool:
    brokers = node.broker.cluster.image.brokers
    return len(brokers) == count and not any(b.fenced for b in brokers.values())


@asynccontextmanager
async def open_cluster(
    base_dir: Path,
    nodes: int = 3,
    *,
    overrides: Mapping[str, str] | None = None,
    ready_timeout_s: float = 60.0,
) -> AsyncIterator[list[LocalNode]]:
    """Start `nodes` combined nodes, wait until every one is ready, yield them, stop them."""
    ports = free_ports(nodes)
    voters = ",".join(f"{i + 1}@127.0.0.1:{port}" for i, port in enumerate(ports))
    started: list[LocalNode] = []
    async with trio.open_nursery() as nursery:
        try:
            for i in range(nodes):
                node_id = i + 1
                settings = {
                    **TEST_OVERRIDES,
                    "node.id": str(node_id),
                    "log.dirs": str(base_dir / f"node{node_id}"),
                    "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{ports[i]}",
                    "controller.quorum.voters": voters,
                    "log.retention.check.interval.ms": "600000",
                    **(overrides or {}),
                }
                broker = Broker(BrokerConfig(settings))
                # a failed data dir halts a node process (ClusterNode.halt): here that node
                # stops, not the process every node of the test shares
                server = Server(broker, shares_process=True)
                bound = await nursery.start(server.run)
                started.append(LocalNode(node_id, broker, server, bound))
            with trio.fail_after(ready_timeout_s):
                for node in started:
                    if not await node.server.wait_ready():
                        raise RuntimeError(f"node {node.node_id} stopped before it was ready")
                # a node's image may lag the others' registrations by a publish
                while True:
                    if all(_sees_all(node, nodes) for node in started):
                        break
                    await trio.sleep(0.05)
            yield started
        finally:
            for node in started:
                node.server.request_shutdown()
            with trio.move_on_after(STOP_TIMEOUT_S):
                for node in started:
                    await node.server.stopped.wait()
            nursery.cancel_scope.cancel()
