"""Randomised failure schedules over three in-process brokers: what acks=all promised survives.

Each schedule (seeded, bounded) mixes acks=all and acks=1 writes, followers that stop and
resume fetching, and leaders that die (stopped, fenced by the controller) and come back on
their data dirs. At the end every node runs again and the replicas converge; then:
- every batch acknowledged with acks=all is in the final leader's log at the offset it was
  acknowledged with (no acknowledged write lost or moved across failovers);
- every replica's log is byte-identical to the leader's (diverged suffixes were truncated).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.records import decode_records, iter_batches
from tests.server.cluster.replication_helpers import (
    MiniController,
    Node,
    produce,
    running_cluster,
    start_node,
    wait_for,
)
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(150)


def _values_by_offset(data: bytes) -> dict[int, bytes | None]:
    out: dict[int, bytes | None] = {}
    for pos, header in iter_batches(data):
        for r in decode_records(data, pos, header):
            out[header.base_offset + r.offset_delta] = r.value
    return out


class Schedule:
    def __init__(self, controller: MiniController, nodes: dict[int, Node], tmp_path: Path,
                 nursery: trio.Nursery) -> None:
        self.controller = controller
        self.nodes = nodes
        self.tmp_path = tmp_path
        self.nursery = nursery
        self.acked: dict[int, bytes] = {}  # offset -> value acknowledged with acks=all
        self.down: set[int] = set()
        self.paused: set[int] = set()
        self.counter = 0

    def part(self) -> object:
        return self.controller.image.topics["t"].partitions[0]

    def leader(self) -> Node | None:
        leader = self.part().leader  # type: ignore[attr-defined]
        return self.nodes.get(leader) if leader >= 0 and leader not in self.down else None

    async def write(self, acks: int) -> None:
        leader = self.leader()
        if leader is None:
            return
        self.counter += 1
        value = b"v%d" % self.counter
        client = await leader.client()
        try:
            answer = await produce(client, "t", batch(value), acks=acks, timeout_ms=400)
        finally:
            await client.aclose()
        if acks == -1 and answer.error_code == ErrorCode.NONE:
            self.acked[answer.base_offset] = value

    def pause(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node_id in self.down or node.broker.partition_role("t", 0) is None:
            return
        if node.broker.replicas is not None and node.broker.replicas.leader_role("t", 0) is None:
            node.cluster.fetchers.remove_partition("t", 0)
            self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        if node_id not in self.paused or node_id in self.down:
            return
        self.paused.discard(node_id)
        role = self.nodes[node_id].broker.partition_role("t", 0)
        if role is not None and not role.is_leader and role.leader >= 0:
            self.nodes[node_id].cluster.fetchers.add_partition("t", 0, role.topic_id, role.leader, role.leader_epoch)

    async def kill_leader(self) -> None:
        leader = self.leader()
        if leader is None or len(self.down) >= 1:
            return
        self.down.add(leader.node_id)
        self.paused.discard(leader.node_id)
        await leader.stop()
        self.controller.fence(leader.node_id)

    async def restart(self, node_id: int) -> None:
        if node_id not in self.down:
            return
        self.down.discard(node_id)
        self.nodes[node_id] = await start_node(self.nursery, self.controller, node_id,
                                               self.tmp_path / f"node{node_id}")

    async def step(self, rng: random.Random) -> None:
        kind = rng.choice(["all", "all", "all", "one", "pause", "resume", "kill", "restart"])
        target = rng.choice(sorted(self.nodes))
        if kind == "all":
            await self.write(-1)
        elif kind == "one":
            await self.write(1)
        elif kind == "pause":
            self.pause(target)
        elif kind == "resume":
            self.resume(target)
        elif kind == "kill":
            await self.kill_leader()
        elif self.down:
            await self.restart(next(iter(self.down)))

    async def settle(self) -> Node:
        for node_id in list(self.down):
            await self.restart(node_id)
        for node_id in list(self.paused):
            self.resume(node_id)
        await wait_for(lambda: self.leader() is not None, what="a leader")
        leader = self.leader()
        assert leader is not None
        await self.write(-1)  # a write in the final epoch: every replica must reach it

        target = leader.broker.logs.get("t", 0)
        assert target is not None

        def converged() -> bool:
            want = target.read_bytes(0, 1 << 24)
            for node in self.nodes.values():
                plog = node.broker.logs.get("t", 0)
                if plog is None or plog.log_end_offset != target.log_end_offset:
                    return False
                if plog.read_bytes(0, 1 << 24) != want:
                    return False
            return True

        def state() -> dict[int, tuple[int, list[tuple[int, int]]]]:
            logs = {i: n.broker.logs.get("t", 0) for i, n in self.nodes.items()}
            return {i: (plog.log_end_offset, plog.leader_epochs.entries) for i, plog in logs.items() if plog}

        await wait_for(converged, timeout_s=30, what=f"replicas to converge on leader {leader.node_id}",
                       detail=state)
        return leader


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
async def test_acknowledged_writes_survive_failure_schedules(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    with trio.fail_after(120):
        async with running_cluster(tmp_path) as (controller, nodes), trio.open_nursery() as nursery:
            controller.create_topic("t", rf=3)
            schedule = Schedule(controller, nodes, tmp_path, nursery)
            for _ in range(14):
                await schedule.step(rng)
            leader = await schedule.settle()
            plog = leader.broker.logs.get("t", 0)
            assert plog is not None
            data = plog.read_bytes(0, 1 << 24)
            values = _values_by_offset(data)
            for offset, value in schedule.acked.items():
                assert values.get(offset) == value, f"acks=all write at {offset} lost (seed {seed})"
            for node in schedule.nodes.values():
                copy = node.broker.logs.get("t", 0)
                assert copy is not None
                assert copy.read_bytes(0, 1 << 24) == data, f"node {node.node_id} diverges (seed {seed})"
                assert copy.leader_epochs.entries == plog.leader_epochs.entries
            assert len(schedule.acked) > 0
            for node in schedule.nodes.values():
                if not node.stopped:
                    await node.stop()
