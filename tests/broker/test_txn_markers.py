"""Transaction markers when a data partition's leader hangs or dies (Kafka's marker channel).

What users rely on: EndTxn answers once the transaction's outcome is decided and logged, not
when the last data leader has its marker - a hung leader must not hold the producer's commit for
a request timeout (librdkafka then times out the commit, aborts, and fails fatally with
INVALID_TXN_STATE); the marker goes to the partition's new leader as soon as the leadership
moves, and each partition gets it once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.coordinator.txn import TxnState
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FindCoordinatorRequest
from kafkapy.protocol.records import iter_batches
from kafkapy.server.cluster.peer import PeerPool
from tests.broker.test_transactions import Txn
from tests.server.cluster.replication_helpers import MiniController, Node, running_cluster, wait_for

pytestmark = pytest.mark.timeout(120)

TID = "tx-markers"


class HungPeer:
    """A 'broker' that accepts connections and reads requests but never answers (SIGSTOP)."""

    def __init__(self) -> None:
        self.requests = trio.Event()
        self.closed = trio.Event()
        self.port = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        async for chunk in stream:
            if chunk:
                self.requests.set()
        self.closed.set()


async def _coordinator(nodes: dict[int, Node]) -> Node:
    client = await nodes[1].client()
    try:
        for _ in range(200):
            r = await client.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=1, coordinator_keys=[TID]))
            found = r.coordinators[0]
            if found.error_code == ErrorCode.NONE:
                return nodes[found.node_id]
            await trio.sleep(0.05)
    finally:
        await client.aclose()
    raise AssertionError("no transaction coordinator")


def _data_topic(controller: MiniController, coordinator: Node) -> str:
    """A one-partition topic whose leader is not the coordinator."""
    for i in range(10):
        name = f"t{i}"
        controller.create_topic(name, rf=3)
        if controller.image.topics[name].partitions[0].leader != coordinator.node_id:
            return name
    raise AssertionError("every topic is led by the coordinator")


def _state(coordinator: Node) -> TxnState | None:
    driver = coordinator.broker.txn_coordinator
    owner = driver.coordinator_for(TID)
    if isinstance(owner, ErrorCode) or TID not in owner.transactions:
        return None
    return owner.transactions[TID].state


async def test_end_txn_does_not_wait_for_a_hung_leader_and_the_marker_follows_the_new_one(
    tmp_path: Path,
) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path, **{"transaction.state.log.num.partitions": "1"}) as (
            controller, nodes,
        ), trio.open_nursery() as nursery:
            hung = HungPeer()
            await nursery.start(hung.serve)
            coord = await _coordinator(nodes)
            await coord.broker.txn_coordinator.ready()
            topic = _data_topic(controller, coord)
            leader = nodes[controller.image.topics[topic].partitions[0].leader]
            # the coordinator's marker connections reach the data leader's address as a hung
            # process would answer: never
            real = coord.cluster.broker_address
            coord.broker.txn_coordinator.marker_peers.pool = PeerPool(
                lambda n: ("127.0.0.1", hung.port) if n == leader.node_id else real(n),
                client_id="markers-under-test",
            )
            to_coord, to_leader = await coord.client(), await leader.client()
            tx = Txn(to_coord, TID)
            assert await tx.init() == ErrorCode.NONE
            assert await tx.add(topic) == ErrorCode.NONE
            data = Txn(to_leader, TID)
            data.pid, data.epoch = tx.pid, tx.epoch
            assert (await data.send(topic, b"a", b"b"))[0] == ErrorCode.NONE

            answered: list[tuple[int, bool]] = []

            async def end() -> None:
                r = await tx.end(True)
                answered.append((int(r.error_code), hung.closed.is_set()))

            nursery.start_soon(end)
            with trio.fail_after(30):
                await hung.requests.wait()
            await wait_for(lambda: bool(answered), timeout_s=30, what="the EndTxn answer")
            # answered while the marker request was still unanswered at the hung leader
            assert answered == [(ErrorCode.NONE, False)]
            assert _state(coord) is TxnState.PREPARE_COMMIT

            await to_leader.aclose()
            await leader.stop()
            controller.fence(leader.node_id)
            new_leader = nodes[controller.image.topics[topic].partitions[0].leader]
            assert new_leader is not leader
            await wait_for(lambda: _state(coord) is TxnState.COMPLETE_COMMIT, timeout_s=30,
                           what="the transaction to complete at the new leader")
            plog = new_leader.broker.logs.get(topic, 0)
            assert plog is not None
            data_bytes = plog.read_bytes(0, 1 << 20)
            markers = [h for _, h in iter_batches(data_bytes) if h.is_control]
            assert len(markers) == 1
            await to_coord.aclose()
            nursery.cancel_scope.cancel()
