"""Data plane under failures: ISR shrink and expansion, min.insync.replicas, acks=all timeouts,
leader failover and the truncation of a diverged former leader (KIP-279)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol.errors import ErrorCode
from tests.server.cluster.replication_helpers import (
    MiniController,
    Node,
    produce,
    running_cluster,
    start_node,
    wait_for,
)
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(120)


def _part(controller: MiniController, topic: str = "t") -> object:
    return controller.image.topics[topic].partitions[0]


def _leader(controller: MiniController, nodes: dict[int, Node]) -> Node:
    return nodes[_part(controller).leader]  # type: ignore[attr-defined]


async def test_isr_shrinks_and_expands_and_min_insync_is_enforced(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3, configs={"min.insync.replicas": "3"})
            leader = _leader(controller, nodes)
            client = await leader.client()
            assert (await produce(client, "t", batch(b"first"), acks=-1)).error_code == ErrorCode.NONE
            gone_id = next(i for i in nodes if i != leader.node_id)
            await nodes[gone_id].stop()
            # the stopped follower is still in the ISR for replica.lag.time.max.ms: no HW progress
            timed_out = await produce(client, "t", batch(b"late"), acks=-1, timeout_ms=300)
            assert timed_out.error_code == ErrorCode.REQUEST_TIMED_OUT
            # waiting out the lag time: the ISR shrinks to 2 < min.insync.replicas after the append
            shrunk = await produce(client, "t", batch(b"during"), acks=-1, timeout_ms=15_000)
            assert shrunk.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            assert gone_id not in _part(controller).isr  # type: ignore[attr-defined]
            assert (leader.broker.stats.isr_shrinks, leader.broker.stats.isr_expands) == (1, 0)
            plog = leader.broker.logs.get("t", 0)
            assert plog is not None
            assert plog.high_watermark == plog.log_end_offset == 3  # the shrink committed them
            refused = await produce(client, "t", batch(b"refused"), acks=-1)
            assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            assert plog.log_end_offset == 3  # nothing written
            assert (await produce(client, "t", batch(b"acks1"), acks=1)).error_code == ErrorCode.NONE
            # the follower comes back on its data dir, catches up and rejoins the ISR
            async with trio.open_nursery() as nursery:
                back = await start_node(nursery, controller, gone_id, tmp_path / f"node{gone_id}")
                await wait_for(lambda: gone_id in _part(controller).isr, timeout_s=30,  # type: ignore[attr-defined]
                               what="ISR expansion")
                await wait_for(lambda: leader.broker.stats.isr_expands == 1, timeout_s=30,
                               what="the expansion counted by the leader")
                assert leader.broker.stats.isr_shrinks == 1
                copy = back.broker.logs.get("t", 0)
                assert copy is not None
                assert copy.log_end_offset >= 4
                ok = await produce(client, "t", batch(b"again"), acks=-1)
                assert ok.error_code == ErrorCode.NONE
                await back.stop()
            await client.aclose()


async def test_a_diverged_former_leader_truncates_and_follows(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", rf=3)
            old = _leader(controller, nodes)
            old_epoch = _part(controller).leader_epoch  # type: ignore[attr-defined]
            client = await old.client()
            assert (await produce(client, "t", batch(b"committed"), acks=-1)).error_code == ErrorCode.NONE
            followers = [n for i, n in nodes.items() if i != old.node_id]
            for f in followers:  # they stop fetching: what the leader writes now stays its own
                f.cluster.fetchers.remove_partition("t", 0)
            lonely = await produce(client, "t", batch(b"lost-1", b"lost-2"), acks=1)
            assert lonely.error_code == ErrorCode.NONE
            await client.aclose()
            await old.stop()
            controller.fence(old.node_id)
            new = _leader(controller, nodes)
            assert new.node_id != old.node_id
            assert _part(controller).leader_epoch == old_epoch + 1  # type: ignore[attr-defined]
            client = await new.client()
            answer = await produce(client, "t", batch(b"new-leader"), acks=-1)
            assert answer.error_code == ErrorCode.NONE
            assert answer.base_offset == 1  # the former leader's acks=1 batch was never committed
            await client.aclose()
            async with trio.open_nursery() as nursery:
                back = await start_node(nursery, controller, old.node_id, tmp_path / f"node{old.node_id}")
                leader_log = new.broker.logs.get("t", 0)
                copy = back.broker.logs.get("t", 0)
                assert leader_log is not None
                assert copy is not None

                def same() -> bool:
                    return (copy.log_end_offset == leader_log.log_end_offset
                            and copy.read_bytes(0, 1 << 20) == leader_log.read_bytes(0, 1 << 20))

                await wait_for(same, timeout_s=20, what="the former leader to converge")
                assert copy.leader_epochs.entries == leader_log.leader_epochs.entries
                await wait_for(lambda: back.node_id in _part(controller).isr, timeout_s=30,  # type: ignore[attr-defined]
                               what="the former leader to rejoin the ISR")
                await back.stop()


async def test_an_isr_expansion_committed_with_its_answer_lost_holds_the_hw(tmp_path: Path) -> None:
    """The controller commits the leader's AlterPartition adding a follower, but the leader
    hears neither the answer nor the metadata (its controller lost leadership, it is cut off):
    the follower is in the ISR the controller may elect from, so acks=all must wait for it
    (the leader once forgot the expansion and acknowledged records only the others held)."""
    with trio.fail_after(90):
        async with running_cluster(tmp_path, min_isr=2) as (controller, nodes):
            controller.create_topic("t", rf=3)
            leader = _leader(controller, nodes)
            tid = controller.image.topics["t"].topic_id
            late_id, other_id = [i for i in nodes if i != leader.node_id]
            late = nodes[late_id]
            late.cluster.fetchers.remove_partition("t", 0)
            client = await leader.client()
            assert (await produce(client, "t", batch(b"a"), acks=-1)).error_code == ErrorCode.NONE
            await wait_for(lambda: late_id not in _part(controller).isr, timeout_s=30,  # type: ignore[attr-defined]
                           what="the stopped follower to leave the ISR")
            held: list[object] = []
            publish = leader.publish
            leader.publish = lambda image, delta: held.append((image, delta))  # type: ignore[method-assign]
            channel = leader.cluster.channel

            class LosesAnswers:
                async def alter_partition(self, req: object) -> object:
                    await channel.alter_partition(req)  # committed ...
                    raise RuntimeError("connection to the controller lost")  # ... unanswered

            leader.cluster.channel = LosesAnswers()
            epoch = _part(controller).leader_epoch  # type: ignore[attr-defined]
            late.cluster.fetchers.add_partition("t", 0, tid, leader.node_id, epoch)
            await wait_for(lambda: late_id in _part(controller).isr, timeout_s=30,  # type: ignore[attr-defined]
                           what="the controller to commit the expansion")
            late.cluster.fetchers.remove_partition("t", 0)  # the added follower stops fetching
            answer = await produce(client, "t", batch(b"b"), acks=-1, timeout_ms=1_000)
            assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT  # not acknowledged ...
            copy = late.broker.logs.get("t", 0)
            assert copy is not None
            assert copy.log_end_offset == 1  # ... as the ISR member lacks it
            # the leader learns the outcome: the ISR with the late follower; it shrinks it again
            leader.cluster.channel = channel
            leader.publish = publish  # type: ignore[method-assign]
            leader.publish(controller.image.copy(), None)
            await wait_for(lambda: late_id not in _part(controller).isr, timeout_s=30,  # type: ignore[attr-defined]
                           what="the late follower to leave the ISR again")
            assert other_id in _part(controller).isr  # type: ignore[attr-defined]
            plog = leader.broker.logs.get("t", 0)
            assert plog is not None
            await wait_for(lambda: plog.high_watermark == 2, timeout_s=10, what="the HW")
            assert held  # the leader had been cut off from the metadata meanwhile
            await client.aclose()
