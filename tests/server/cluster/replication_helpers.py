"""In-process brokers for the data-plane tests: real Brokers and Servers on 127.0.0.1 sockets,
a real QuorumController, and the metadata it commits published to every broker at once.

Why not the full node: these tests are about the data plane (roles, replica fetchers, HW, ISR,
acks=all, truncation); a Raft quorum underneath would add elections and timing that have their
own tests. The controller here is the real `kafkapy.controller` one; only the transport
(Raft log + publisher + controller channel RPCs) is collapsed into direct calls.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio
import trio.lowlevel

from kafkapy.broker.config import BrokerConfig
from kafkapy.controller.controller import (
    AlterPartitionItem,
    ControllerConfig,
    ControllerResult,
    NewTopic,
    QuorumController,
)
from kafkapy.controller.image import MetadataDelta, MetadataImage
from kafkapy.controller.records import Endpoint
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkapy.protocol.messages.produce import ProduceResponse_PartitionProduceResponse
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from tests.server.helpers import Client, build_node

T = TypeVar("T")
CLUSTER_ID = "dataplane-test"
IO_TIMEOUT_S = 20


class MiniController:
    """The active controller, committing at once and publishing to every running broker."""

    def __init__(self, *, min_isr: int = 1) -> None:
        self.ctl = QuorumController(
            ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=10**9, default_replication_factor=3,
                             min_insync_replicas=min_isr),
            MetadataImage(),
            rng=random.Random(7),
        )
        self.image = MetadataImage()
        self.nodes: dict[int, Node] = {}
        self.epochs: dict[int, int] = {}
        self.alter_requests = 0

    def commit(self, result: ControllerResult[T]) -> T:
        delta = MetadataDelta()
        for record in result.records:
            self.image.apply(record, self.image.offset + 1, delta)
        for node in self.nodes.values():
            node.publish(self.image.copy(), delta)
        return result.response

    def register(self, node: Node) -> None:
        self.nodes[node.node_id] = node
        reply = self.commit(self.ctl.register_broker(
            node.node_id, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
            endpoints=[Endpoint("PLAINTEXT", "127.0.0.1", node.port)], now_ms=0,
            previous_broker_epoch=self.epochs.get(node.node_id, -1),
        ))
        assert reply.error is ErrorCode.NONE, reply
        self.epochs[node.node_id] = reply.broker_epoch
        node.publish(self.image.copy(), None)
        beat = self.commit(self.ctl.broker_heartbeat(
            node.node_id, reply.broker_epoch, current_metadata_offset=self.image.offset, now_ms=0
        ))
        assert not beat.is_fenced, beat

    def fence(self, node_id: int) -> None:
        """The broker died: fence it (its partitions get new leaders from the ISR)."""
        self.nodes.pop(node_id, None)
        self.commit(self.ctl.broker_heartbeat(
            node_id, self.epochs[node_id], current_metadata_offset=self.image.offset, want_fence=True, now_ms=0
        ))

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: dict[str, str] | None = None) -> None:
        [result] = self.commit(self.ctl.create_topics([NewTopic(name, partitions, rf, configs=configs or {})]))
        assert result.error is ErrorCode.NONE, result

    def alter_partition(self, broker_id: int, req: AlterPartitionRequest) -> AlterPartitionResponse:
        self.alter_requests += 1
        items = [
            AlterPartitionItem(None, t.topic_id, p.partition_index, p.leader_epoch,
                               [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs], p.partition_epoch)
            for t in req.topics for p in t.partitions
        ]
        reply = self.commit(self.ctl.alter_partition(broker_id, req.broker_epoch, items))
        response = AlterPartitionResponse(error_code=reply.error)
        for r in reply.partitions:
            response.topics.append(AlterPartitionResponse.TopicData(
                topic_id=r.topic_id or uuid.UUID(int=0),
                partitions=[AlterPartitionResponse.PartitionData(
                    partition_index=r.partition, error_code=r.error, leader_id=r.leader,
                    leader_epoch=r.leader_epoch, isr=list(r.isr), partition_epoch=r.partition_epoch,
                )],
            ))
        return response


class Channel:
    """`node.channel` for one broker: its RPCs to the (in-process) active controller."""

    def __init__(self, controller: MiniController, broker_id: int) -> None:
        self.controller = controller
        self.broker_id = broker_id

    async def alter_partition(self, req: AlterPartitionRequest) -> AlterPartitionResponse:
        await trio.lowlevel.checkpoint()
        return self.controller.alter_partition(self.broker_id, req)

    async def aclose(self) -> None:
        """No connections of its own (the node closes its channel at shutdown)."""

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A block of producer ids from the controller, as AllocateProducerIds gives one."""
        await trio.lowlevel.checkpoint()
        reply = self.controller.commit(self.controller.ctl.allocate_producer_ids(
            self.broker_id, self.controller.epochs[self.broker_id]))
        if reply.error != ErrorCode.NONE:
            raise RuntimeError(f"AllocateProducerIds: {reply.error.name}")
        return reply.start, reply.length

    async def create_topics(self, req: CreateTopicsRequest) -> CreateTopicsResponse:
        await trio.lowlevel.checkpoint()
        response = CreateTopicsResponse()
        for t in req.topics:
            [result] = self.controller.commit(self.controller.ctl.create_topics(
                [NewTopic(t.name, t.num_partitions, t.replication_factor)]
            ))
            response.topics.append(CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=result.error))
        return response


class Node:
    """One broker: Broker + Server with only the data-plane part of its ClusterNode running."""

    def __init__(self, node_id: int, broker: Broker, server: Server, port: int) -> None:
        self.node_id = node_id
        self.broker = broker
        self.server = server
        self.port = port
        self.stopped = False

    @property
    def cluster(self) -> Any:
        return self.server.cluster

    def publish(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        if self.stopped:
            return
        self.cluster.publisher.publish(image, delta)

    async def client(self) -> Client:
        return await Client.connect(self.port)

    async def stop(self) -> None:
        self.stopped = True
        self.server.request_shutdown()
        with trio.fail_after(IO_TIMEOUT_S):
            await self.server.stopped.wait()


def node_config(node_id: int, data_dir: Path, **overrides: str) -> BrokerConfig:
    return BrokerConfig(node_settings(node_id, data_dir, **overrides))


def node_settings(node_id: int, data_dir: Path, **overrides: str) -> dict[str, str]:
    """A broker-only member of a cluster whose one controller (node 100) never answers."""
    settings = {
        "node.id": str(node_id),
        "process.roles": "broker",
        "controller.quorum.voters": "100@127.0.0.1:1",
        "controller.listener.names": "CONTROLLER",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "log.retention.check.interval.ms": "600000",
        "offsets.topic.num.partitions": "1",
        "replica.fetch.wait.max.ms": "200",
        "replica.fetch.backoff.ms": "50",
        "replica.lag.time.max.ms": "1500",
    }
    settings.update(overrides)
    return settings


async def start_node(
    nursery: trio.Nursery, controller: MiniController, node_id: int, data_dir: Path, **overrides: str
) -> Node:
    server = build_node(data_dir, node_settings(node_id, data_dir, **overrides))
    broker = server.broker
    cluster = server.cluster
    # only the data plane runs: the metadata comes from `controller` directly (through the
    # node's publisher, which has no task of its own); the node's Raft replica exists but never
    # runs (no leader known: clients are told this broker is the controller)
    cluster.controller = cluster.lifecycle = None
    cluster.channel = Channel(controller, node_id)  # type: ignore[assignment]
    fetchers = cluster.fetchers
    assert fetchers is not None
    cluster.parts = lambda: {"fetchers": fetchers}  # type: ignore[method-assign]
    bound = await nursery.start(server.run)
    node = Node(node_id, broker, server, bound[0].port)
    controller.register(node)
    return node


@asynccontextmanager
async def running_cluster(tmp_path: Path, count: int = 3, *, min_isr: int = 1,
                          **overrides: str) -> AsyncIterator[tuple[MiniController, dict[int, Node]]]:
    controller = MiniController(min_isr=min_isr)
    async with trio.open_nursery() as nursery:
        nodes = {}
        for i in range(1, count + 1):
            nodes[i] = await start_node(nursery, controller, i, tmp_path / f"node{i}", **overrides)
        try:
            yield controller, nodes
        finally:
            for node in nodes.values():
                if not node.stopped:
                    await node.stop()


async def produce(client: Client, topic: str, batch: bytes, *, acks: int = -1, timeout_ms: int = 10_000,
                  partition: int = 0) -> ProduceResponse_PartitionProduceResponse:
    req = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)]
    )])
    response = await client.request(ApiKey.PRODUCE, 9, req)
    assert isinstance(response, ProduceResponse)
    return response.responses[0].partition_responses[0]


async def wait_for(predicate: Any, *, timeout_s: float = 10, what: str = "condition", detail: Any = None) -> None:
    """Poll `predicate()` (bounded by `timeout_s`)."""
    deadline = trio.current_time() + timeout_s
    for _ in range(int(timeout_s / 0.02) + 1):
        if predicate():
            return
        if trio.current_time() > deadline:
            break
        await trio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}" + (f": {detail()}" if detail is not None else ""))
