"""Broker sessions on the active controller (3 in-process nodes, real sockets).

What the cluster relies on: the controller fences a broker only when the broker's heartbeats
stopped reaching it - never because the controller itself was slow to get to them. Issue 12
saw a new active controller fence all three live brokers 9 s after it took over, dropping every
ISR to one member.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from kafkapy.broker.config import BrokerConfig
from kafkapy.broker.stats import BrokerStats
from kafkapy.controller.image import MetadataImage
from kafkapy.server.cluster.controller_driver import ControllerDriver
from kafkapy.testing.cluster import TEST_OVERRIDES
from kafkapy.testing.local import open_cluster
from tests.server.cluster.controller_helpers import (
    active_controller,
    create_replicated,
    image_of,
    wait_until,
)

pytestmark = pytest.mark.timeout(150)

SESSION_S = int(TEST_OVERRIDES["broker.session.timeout.ms"]) / 1000


async def test_heartbeats_queued_behind_a_slow_operation_keep_brokers_alive(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An operation that holds the controller's queue for longer than a session (a proposal
    stuck behind a slow fsync) delays the heartbeats' answers, not their arrival: they count
    when they arrive, and nobody is fenced."""
    caplog.set_level(logging.WARNING, logger="kafkapy.server.cluster.controller_driver")
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            await create_replicated(nodes[0].broker_port, "kept", 3)
            leader = active_controller(nodes)

            def full_isrs() -> bool:
                parts = image_of(leader).topics["kept"].partitions.values()
                return all(len(p.isr) == 3 for p in parts)

            await wait_until("every ISR full", full_isrs)
            driver = leader.broker.cluster.controller  # type: ignore[union-attr]
            assert isinstance(driver, ControllerDriver)
            async with driver._lock:  # a slow operation
                await trio.sleep(2.5 * SESSION_S)
            await trio.sleep(SESSION_S / 2)  # the tick, its fences committed and published
            assert not [r for r in caplog.records if "fenced brokers" in r.getMessage()]
            assert all(not b.fenced for b in image_of(leader).brokers.values())
            assert full_isrs()


async def test_a_re_elected_node_activates_although_its_earlier_proposals_were_lost() -> None:
    """Offsets this node proposed as leader of an earlier epoch may have been truncated away by
    the next leader; when it leads again it must not wait for them before activating (it would
    answer NOT_CONTROLLER to every broker until the log grew past them)."""
    voters = "1@127.0.0.1:19001,2@127.0.0.1:19002,3@127.0.0.1:19003"
    config = BrokerConfig(
        {
            "node.id": "1",
            "process.roles": "broker,controller",
            "controller.quorum.voters": voters,
            "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19001",
            "controller.listener.names": "CONTROLLER",
        }
    )
    assert config.cluster is not None
    image = MetadataImage()
    raft = SimpleNamespace(is_leader=True, epoch=5, leader_changed=None)
    publisher = SimpleNamespace(applied_epoch=5, applied_offset=image.offset, image=image)
    driver = ControllerDriver(
        config, config.cluster, raft, publisher, cluster_id="c", stats=BrokerStats()  # type: ignore[arg-type]
    )
    driver._last_proposed = image.offset + 40  # proposed in epoch 3, then truncated
    driver._last_proposed_epoch = 3
    driver._maybe_activate()
    assert driver.active() is not None
