"""One INFO line per topic change (created, grown, configs, this broker's roles) and nothing
else at INFO for it (the image's role totals, too, are at DEBUG: they told the change twice); the
per-partition leader/follower lines at DEBUG."""

from __future__ import annotations

import logging
import uuid

import pytest

from kafkapy.broker.metadata_store import TopicInfo
from kafkapy.controller.image import PartitionImage, TopicImage
from kafkapy.server.cluster.topic_changes import topic_change
from tests.server.cluster.replication_helpers import wait_for
from tests.server.helpers import create_partitions, create_topic, running_broker

LOGGER = "kafkapy.server.cluster.partition_roles"


async def test_create_and_grow_a_topic_is_one_info_line_each(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, LOGGER)
    async with running_broker(None) as (_, _server, port):
        caplog.clear()
        await create_topic(port, "orders", 6, {"retention.ms": "3600000"})
        await create_partitions(port, "orders", 8)
        # the answer comes once the image is published; its partitions are applied in slices
        await wait_for(lambda: sum(r.getMessage().startswith("orders-") for r in caplog.records) >= 8,
                       timeout_s=60, what="the grown partitions applied")
    records = [r for r in caplog.records if r.name == LOGGER]
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert infos == [
        "topic orders created: 6 partitions, replication factor 1, configs retention.ms=3600000; "
        "this broker leads 6 and follows 0",
        "topic orders: 6 -> 8 partitions; this broker became leader of 6, leader of 7 "
        "(this broker leads 8 and follows 0)",
    ]
    per_partition = [r for r in records if r.getMessage().startswith("orders-")]
    assert len(per_partition) == 8
    assert all(r.levelno == logging.DEBUG for r in per_partition)


def _image(partitions: int, leader: int) -> TopicImage:
    topic_id = uuid.uuid4()
    parts = {p: PartitionImage((1, 2), (1, 2), leader) for p in range(partitions)}
    return TopicImage("t", topic_id, parts, {})


def test_a_failover_names_the_partitions_this_broker_took_over() -> None:
    t = _image(2, leader=1)
    info = TopicInfo("t", t.topic_id, 2)
    line = topic_change(info, info, t, {0: False, 1: False}, {0: True, 1: False})
    assert line == "topic t: this broker became leader of 0 (this broker leads 1 and follows 1)"
    assert topic_change(info, info, t, {0: True}, {0: True}) is None
