"""Partition reassignment in a three-node cluster (in-process).

What clients rely on (kafka-reassign-partitions, AdminClient.alterPartitionReassignments): a
new target replica list first adds the new replicas, which copy the data and join the ISR; then
the replicas not in the target leave (deleting their logs) and, if the leader left, a target
replica leads - nothing acknowledged is lost on the way. ListPartitionReassignments shows a
reassignment while it is in progress; cancelling one goes back to the replicas before it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkapy.testing.local import open_cluster
from tests.server.cluster.replication_helpers import produce
from tests.server.cluster.test_admin_leadership import call, create, image, wait_image, wait_in_sync
from tests.server.helpers import Client, batch

pytestmark = pytest.mark.timeout(120)


def reassign(*moves: tuple[str, int, list[int] | None]) -> AlterPartitionReassignmentsRequest:
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, replicas in moves:
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsRequest.ReassignablePartition(
                partition_index=partition, replicas=replicas
            )
        )
    return AlterPartitionReassignmentsRequest(
        timeout_ms=20_000,
        topics=[
            AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )


def answers(response: Any) -> list[tuple[str, int, ErrorCode]]:
    return [
        (t.name, p.partition_index, ErrorCode(p.error_code))
        for t in response.responses
        for p in t.partitions
    ]


async def listed(port: int) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    response = await call(
        port, ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest()
    )
    assert response.error_code == ErrorCode.NONE
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }


async def test_reassignment_moves_data_and_leadership(tmp_path: Path) -> None:
    with trio.fail_after(100):
        async with open_cluster(tmp_path, 3) as nodes:
            by_id = {n.node_id: n for n in nodes}
            await create(nodes[0].broker_port, "mv", 1, 2)
            await wait_in_sync(nodes, "mv", 1, 2)
            part = image(nodes[0]).partition("mv", 0)
            a = part.leader
            b = next(r for r in part.replicas if r != a)
            c = next(n.node_id for n in nodes if n.node_id not in part.replicas)
            client = await Client.connect(by_id[a].broker_port)
            try:
                for i in range(20):
                    assert (
                        await produce(client, "mv", batch(b"v%d" % i))
                    ).error_code == ErrorCode.NONE
            finally:
                await client.aclose()

            # Move off the leader: c is added, catches up, joins the ISR; then a leaves.
            port = by_id[b].broker_port
            moved = await call(
                port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign(("mv", 0, [c, b]))
            )
            assert moved.error_code == ErrorCode.NONE
            assert answers(moved) == [("mv", 0, ErrorCode.NONE)]

            def done(img: Any) -> bool:
                p = img.partition("mv", 0)
                return p.replicas == (c, b) and not p.adding_replicas and p.leader in (b, c)

            for node in nodes:
                await wait_image(node, done, "mv-0 moved to [c, b]")
            assert set(image(nodes[0]).partition("mv", 0).isr) == {b, c}
            with trio.fail_after(20):
                while by_id[a].broker.logs.get("mv", 0) is not None:  # noqa: ASYNC110
                    await trio.sleep(0.05)
            assert by_id[c].broker.logs.get("mv", 0).log_end_offset == 20  # type: ignore[union-attr]
            leader = by_id[image(nodes[0]).partition("mv", 0).leader]
            lookup = ListOffsetsRequest(
                replica_id=-1,
                topics=[
                    ListOffsetsRequest.ListOffsetsTopic(
                        name="mv",
                        partitions=[
                            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)
                        ],
                    )
                ],
            )
            with trio.fail_after(20):
                while True:
                    latest = (
                        (await call(leader.broker_port, ApiKey.LIST_OFFSETS, 7, lookup))
                        .topics[0]
                        .partitions[0]
                    )
                    if latest.error_code == ErrorCode.NONE:
                        break
                    await trio.sleep(0.1)
            assert latest.offset == 20  # every acknowledged record is on the new replicas
            assert await listed(port) == {}
            # A voter that is not the active controller refuses, so the broker's channel retries.
            idle = next(n for n in nodes if not n.broker.cluster.raft.is_leader)  # type: ignore[union-attr]
            refused = await call(
                idle.controller_port,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                0,
                reassign(("mv", 0, [c])),
            )
            assert refused.error_code == ErrorCode.NOT_CONTROLLER
            assert answers(refused) == [("mv", 0, ErrorCode.NOT_CONTROLLER)]

            # A target on a broker that is down stays in progress; cancel goes back.
            by_id[a].server.request_shutdown()
            with trio.fail_after(30):
                await by_id[a].server.stopped.wait()
            port = by_id[c].broker_port
            started = await call(
                port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign(("mv", 0, [c, b, a]))
            )
            assert answers(started) == [("mv", 0, ErrorCode.NONE)]
            assert await listed(port) == {("mv", 0): ([c, b, a], [a], [])}
            bad = await call(
                port,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                0,
                reassign(("mv", 0, [c, 99]), ("mv", 4, [c]), ("none", 0, [c])),
            )
            assert answers(bad) == [
                ("mv", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                ("mv", 4, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                ("none", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ]
            cancelled = await call(
                port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign(("mv", 0, None))
            )
            assert answers(cancelled) == [("mv", 0, ErrorCode.NONE)]
            assert await listed(port) == {}
            assert image(by_id[c]).partition("mv", 0).replicas == (c, b)
            again = await call(
                port, ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, reassign(("mv", 0, None))
            )
            assert answers(again) == [("mv", 0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)]
