"""New logs of a large metadata delta are created off the event loop (a worker thread, in
chunks); their partitions take roles once the logs exist, and a topic deleted meanwhile leaves
no log behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.cluster.partition_roles import INLINE_LOG_CREATES, LOG_CREATE_CHUNK
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(120)

MANY = max(INLINE_LOG_CREATES, LOG_CREATE_CHUNK) * 2 + 5  # more than inline, several chunks


async def test_many_new_logs_are_created_off_the_loop_then_take_roles(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path, count=2) as (controller, nodes):
            await trio.testing.wait_all_tasks_blocked(0.05)  # every node's log creation loop runs
            controller.create_topic("many", partitions=MANY, rf=2)
            # the delta was applied without a checkpoint: the loop created none of the logs
            for node in nodes.values():
                assert all(node.broker.logs.get("many", p) is None for p in range(MANY))
                assert all(node.broker.partition_role("many", p) is None for p in range(MANY))
            for node in nodes.values():
                await wait_for(
                    lambda node=node: all(node.broker.partition_role("many", p) is not None for p in range(MANY)),
                    timeout_s=60, what=f"node {node.node_id}: every partition has a role",
                )
                assert all(node.broker.logs.get("many", p) is not None for p in range(MANY))
            for p in (0, MANY - 1):
                leader = nodes[controller.image.topics["many"].partitions[p].leader]
                client = await leader.client()
                answer = await produce(client, "many", batch(b"x"), acks=-1, partition=p)
                assert answer.error_code == ErrorCode.NONE
                await client.aclose()


async def test_a_topic_deleted_while_its_logs_are_created_leaves_no_log(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path, count=2) as (controller, nodes):
            await trio.testing.wait_all_tasks_blocked(0.05)  # every node's log creation loop runs
            controller.create_topic("brief", partitions=MANY, rf=2)
            node = nodes[1]
            # delete once the first chunk exists, with later chunks still to come or in flight
            await wait_for(lambda: node.broker.logs.get("brief", 0) is not None or any(
                node.broker.logs.get("brief", p) is not None for p in range(MANY)), timeout_s=60,
                what="a first chunk of logs")
            [result] = controller.commit(controller.ctl.delete_topics(["brief"]))
            assert result.error is ErrorCode.NONE
            for n in nodes.values():
                data_dir = tmp_path / f"node{n.node_id}"
                await wait_for(
                    lambda n=n, data_dir=data_dir: (
                        all(n.broker.logs.get("brief", p) is None for p in range(MANY))
                        and not any(d.name.startswith("brief-") for d in data_dir.iterdir())
                    ),
                    timeout_s=60, what=f"node {n.node_id}: no log of the deleted topic",
                )
                # a creation still in flight at the deletion must not bring one back later
                await trio.sleep(0.5)
                assert not any(d.name.startswith("brief-") for d in data_dir.iterdir())
                assert all(n.broker.partition_role("brief", p) is None for p in range(MANY))
