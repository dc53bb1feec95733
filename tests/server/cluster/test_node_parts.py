"""ClusterNode's duties towards the parts it runs (docs/cluster.md, node.py).

What the cluster relies on: the parts are built in contract order on the right roles, the real
classes with their dependencies (Raft feeds the publisher, whose image is the node's); a part
whose run() raises is restarted (one bug must not silently stop, say, heartbeats for good) with a
growing pause; at SIGTERM the lifecycle's controlled shutdown runs, and a failing one is logged,
not raised; readiness means "registered and unfenced". The parts' own behaviour is tested by
their owners; here small stand-ins record what the node asks of them, on a real node (built
as `kafkapy serve` builds it, `build_node`).
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing

from kafkapy.broker.config import BrokerConfig
from kafkapy.server.broker import Broker
from kafkapy.server.cluster.controller_driver import ControllerDriver
from kafkapy.server.cluster.lifecycle import BrokerLifecycle, ControllerChannel
from kafkapy.server.cluster.node import ClusterNode
from kafkapy.server.cluster.raft_driver import RaftDriver
from kafkapy.server.cluster.replica_fetcher import ReplicaFetcherManager
from tests.server.helpers import build_node

SETTINGS = {
    "node.id": "1",
    "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
}


class Part:
    """Records run/shutdown calls; run() raises `failures` times before it settles."""

    def __init__(self, name: str, log: list[tuple[str, str, float]], failures: int = 0) -> None:
        self.name, self.log, self.failures = name, log, failures

    async def run(self) -> None:
        self.log.append(("run", self.name, trio.current_time()))
        if self.failures:
            self.failures -= 1
            raise RuntimeError(f"{self.name} broke")
        await trio.sleep_forever()



class Lifecycle(Part):
    def __init__(self, name: str, log: list[tuple[str, str, float]], *, fail: bool = False) -> None:
        super().__init__(name, log)
        self.fail = fail

    async def controlled_shutdown(self) -> None:
        self.log.append(("controlled", self.name, trio.current_time()))
        if self.fail:
            raise RuntimeError("a failing controlled shutdown is logged, not raised")


def broker_and_node(tmp_path: Path, **extra: str) -> tuple[Broker, ClusterNode]:
    server = build_node(tmp_path, {**SETTINGS, **extra})
    return server.broker, server.cluster


async def test_parts_follow_the_roles(tmp_path: Path) -> None:
    broker, node = broker_and_node(tmp_path / "combined")
    try:
        assert broker.cluster is node
        assert list(node.parts()) == ["raft", "controller", "lifecycle", "fetchers"]
        assert isinstance(node.raft, RaftDriver)
        assert isinstance(node.controller, ControllerDriver)
        assert isinstance(node.channel, ControllerChannel)
        assert isinstance(node.lifecycle, BrokerLifecycle)
        assert node.lifecycle.channel is node.channel
        assert isinstance(node.fetchers, ReplicaFetcherManager)
        assert node.image is node.publisher.image
    finally:
        broker.close()
    broker, node = broker_and_node(
        tmp_path / "broker-only", **{"node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0"}
    )
    try:
        assert node.controller is None
        assert list(node.parts()) == ["raft", "lifecycle", "fetchers"]
        # the voters' controller listeners are known from the config, brokers' from the image
        assert node.controller_peers.get(2).address == ("127.0.0.1", 2)
        assert node.broker_address(2) is None
    finally:
        broker.close()


async def test_the_broker_opens_its_node_once(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig({**SETTINGS, "log.dirs": str(tmp_path / "cluster")}))
    try:
        # every node has its cluster parts, but only once they are built (Server(broker) does)
        with pytest.raises(RuntimeError, match="not open"):
            _ = broker.cluster
        node = broker.open_cluster()
        assert broker.cluster is node
        with pytest.raises(ValueError, match="already open"):
            broker.open_cluster()
        assert broker.cluster is node
    finally:
        broker.close()


async def test_failing_part_restarts_and_shutdown_order(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    broker, node = broker_and_node(tmp_path)
    log: list[tuple[str, str, float]] = []
    node.raft = Part("raft", log)  # type: ignore[assignment]
    node.controller = Part("controller", log)  # type: ignore[assignment]
    node.lifecycle = Lifecycle("lifecycle", log, fail=True)  # type: ignore[assignment]
    node.fetchers = Part("fetchers", log, failures=3)  # type: ignore[assignment]
    try:
        async with trio.open_nursery() as nursery:
            node.run(nursery)
            await trio.sleep(30)
            runs = [t for kind, name, t in log if kind == "run" and name == "fetchers"]
            assert len(runs) == 4, "a part that raised is run again until it stays up"
            pauses = [b - a for a, b in itertools.pairwise(runs)]
            assert pauses == sorted(pauses)
            assert pauses[0] > 0
            assert pauses[-1] > pauses[0], "the pause grows"
            assert [name for kind, name, _ in log if kind == "run"].count("raft") == 1
            log.clear()
            await node.shutdown(5)
            nursery.cancel_scope.cancel()
        assert [(kind, name) for kind, name, _ in log] == [("controlled", "lifecycle")]
    finally:
        broker.close()


async def test_ready_means_registered_and_unfenced(tmp_path: Path, autojump_clock: trio.testing.MockClock) -> None:
    from kafkapy.controller.image import MetadataImage
    from kafkapy.controller.records import Endpoint, RegisterBrokerRecord, UnfenceBrokerRecord

    broker, node = broker_and_node(tmp_path)
    try:
        image = MetadataImage()
        node.publisher.publish(image, None)
        assert node.image is image
        assert not node.is_ready()
        image.apply(RegisterBrokerRecord(
            broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=5,
            endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9092),), rack=None, fenced=False,
        ), 1)
        assert not node.is_ready(), "a previous process's registration (a restart) is not ready"
        assert node.lifecycle is not None
        image.apply(RegisterBrokerRecord(
            broker_id=1, incarnation_id=node.lifecycle.incarnation_id, broker_epoch=7,
            endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9092),), rack=None, fenced=True,
        ), 1)
        assert not node.is_ready(), "a fenced registration is not ready"
        assert node.broker_address(1) == ("127.0.0.1", 9092)
        with trio.move_on_after(1) as scope:
            await node.wait_ready()
        assert scope.cancelled_caught
        image.apply(UnfenceBrokerRecord(id=1, epoch=7), 2)
        with trio.fail_after(1):
            await node.wait_ready()
        assert node.is_ready()
    finally:
        broker.close()
