"""Work per change, not per partition: one AlterPartition per leader for the ISR changes due at
once, and one log line per metadata image for its role changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from tests.server.cluster.replication_helpers import running_cluster, wait_for

pytestmark = pytest.mark.timeout(120)
PARTITIONS = 12


async def test_isr_shrinks_of_a_stopped_follower_go_in_one_request_per_leader(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            controller.create_topic("t", partitions=PARTITIONS, rf=3)
            parts = controller.image.topics["t"].partitions
            await wait_for(lambda: all(len(p.isr) == 3 for p in parts.values()), what="full ISRs")
            victim = nodes[3]
            followed = [p for p, part in parts.items() if part.leader != victim.node_id]
            assert len(followed) >= 6
            before = controller.alter_requests
            await victim.stop()  # not fenced: the leaders see its fetches stop (replica.lag.time.max.ms)

            def shrunk() -> bool:
                current = controller.image.topics["t"].partitions
                return all(victim.node_id not in current[p].isr for p in followed)

            await wait_for(shrunk, timeout_s=30, what="the stopped follower to leave every ISR")
            # two leaders, each proposing what is due at one ISR check (at most two checks apart)
            assert controller.alter_requests - before <= 4


async def test_a_topic_change_is_one_info_line_per_node(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with trio.fail_after(90):
        async with running_cluster(tmp_path) as (controller, nodes):
            with caplog.at_level(logging.INFO, logger="kafkapy.server.cluster.partition_roles"):
                caplog.clear()
                controller.create_topic("many", partitions=PARTITIONS, rf=3)
            infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
                     and r.name == "kafkapy.server.cluster.partition_roles"]
            summaries = [m for m in infos if "this broker leads" in m]
            assert len(summaries) == len(nodes)  # one topic change, one line per node
            assert [m for m in infos if m not in summaries] == []  # no per-partition or totals line
            led = sum(int(m.split("leads ")[1].split()[0]) for m in summaries)
            followed = sum(int(m.split("follows ")[1].split()[0]) for m in summaries)
            assert (led, followed) == (PARTITIONS, 2 * PARTITIONS)
