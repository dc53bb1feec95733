"""A data dir written by the release whose single node kept `kafkapy-topics.json` (commit
661804a, the fixture built by fixtures/make_legacy_data_dir.py) is migrated into the metadata
log on the first start: every topic (same id, partition count, config overrides), the dynamic
broker config, every message and the committed offsets are there over the wire, the old file is
kept renamed, and a restart after the migration changes nothing."""

from __future__ import annotations

import json
import tarfile
import uuid
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.config import ConfigSource
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeConfigsRequest,
    FetchRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetFetchRequest,
)
from kafkapy.protocol.records import decode_records, iter_batches
from kafkapy.server.cluster.migration import MIGRATED_SUFFIX, TOPICS_FILE, migrate_topics_file
from kafkapy.storage import LogManager
from tests.server.cluster.fixtures.make_legacy_data_dir import EXPECTED, FIXTURE
from tests.server.helpers import Client, running_broker

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4


def legacy_data_dir(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "data"


def legacy_topic_ids(data_dir: Path) -> dict[str, uuid.UUID]:
    path = data_dir / TOPICS_FILE
    if not path.exists():
        path = data_dir / (TOPICS_FILE + MIGRATED_SUFFIX)
    doc = json.loads(path.read_text())
    return {t["name"]: uuid.UUID(t["topic_id"]) for t in doc["topics"]}


async def metadata(client: Client) -> dict[str, Any]:
    resp = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    return {t.name: t for t in resp.topics}


async def topic_configs(client: Client, name: str) -> dict[str, tuple[str | None, int]]:
    resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name)]))
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


async def broker_configs(client: Client) -> dict[str, tuple[str | None, int]]:
    resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1")]))
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


async def fetch_values(client: Client, topic: str, partition: int) -> list[tuple[int, bytes | None]]:
    request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])])
    resp = await client.request(ApiKey.FETCH, 12, request)
    part = resp.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    buf = bytes(part.records or b"")
    out: list[tuple[int, bytes | None]] = []
    for pos, header in iter_batches(buf):
        out += [(header.base_offset + r.offset_delta, r.value) for r in decode_records(buf, pos, header)]
    return out


async def committed(client: Client, group: str) -> dict[tuple[str, int], int]:
    resp = await client.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=None))
    assert resp.error_code == ErrorCode.NONE
    return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}


async def check_everything(port: int, ids: dict[str, uuid.UUID]) -> None:
    client = await Client.connect(port)
    try:
        topics = await metadata(client)
        for name, expected in EXPECTED["topics"].items():  # type: ignore[attr-defined]
            assert topics[name].error_code == ErrorCode.NONE
            assert topics[name].topic_id == ids[name]
            assert len(topics[name].partitions) == expected["partitions"]
            configs = await topic_configs(client, name)
            for key, value in expected["configs"].items():
                assert configs[key] == (value, ConfigSource.DYNAMIC_TOPIC_CONFIG)
        for key, value in EXPECTED["broker_configs"].items():  # type: ignore[attr-defined]
            assert (await broker_configs(client))[key] == (value, ConfigSource.DYNAMIC_BROKER_CONFIG)
        for topic, parts in EXPECTED["messages"].items():  # type: ignore[attr-defined]
            for partition, values in parts.items():
                got = await fetch_values(client, topic, partition)
                assert got == list(enumerate(values))
        assert await committed(client, str(EXPECTED["group"])) == EXPECTED["committed"]
    finally:
        await client.aclose()


async def test_a_legacy_data_dir_is_migrated_without_losing_anything(tmp_path: Path) -> None:
    data_dir = legacy_data_dir(tmp_path)
    ids = legacy_topic_ids(data_dir)
    reserved = int((data_dir / "kafkapy-producer-ids").read_text())
    with trio.fail_after(60):
        async with running_broker(data_dir) as (_, _, port):
            await check_everything(port, ids)
            client = await Client.connect(port)
            resp = await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1))
            await client.aclose()
            assert resp.error_code == ErrorCode.NONE
            assert resp.producer_id >= reserved  # never an id the old node handed out
        assert not (data_dir / TOPICS_FILE).exists()
        assert (data_dir / (TOPICS_FILE + MIGRATED_SUFFIX)).exists()
        assert (data_dir / "__cluster_metadata-0").is_dir()
        # a restart replays the metadata log; the renamed file is not read again
        async with running_broker(data_dir) as (_, _, port):
            await check_everything(port, ids)


def test_a_migrated_data_dir_is_not_migrated_twice(tmp_path: Path) -> None:
    """A crash after the records were written and before the rename leaves the file: the next
    start sees a non-empty metadata log and only renames it."""
    data_dir = legacy_data_dir(tmp_path)
    logs = LogManager([data_dir])
    try:
        written = migrate_topics_file(logs, data_dir, 1)
        assert written > 0
        (data_dir / (TOPICS_FILE + MIGRATED_SUFFIX)).rename(data_dir / TOPICS_FILE)
        assert migrate_topics_file(logs, data_dir, 1) == 0
        assert not (data_dir / TOPICS_FILE).exists()
        end = logs.get("__cluster_metadata", 0)
        assert end is not None
        assert end.log_end_offset == written
    finally:
        logs.close()


async def test_group_configs_a_single_node_kept_in_the_topics_file_are_migrated(tmp_path: Path) -> None:
    """Between the group configs and the quorum of one, a single node kept them beside the
    dynamic broker configs in the topics file (`group_configs`); they become ConfigRecords."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / TOPICS_FILE).write_text(json.dumps({
        "version": 1, "topics": [],
        "group_configs": {"orders": {"consumer.session.timeout.ms": "50000"}}}))
    with trio.fail_after(30):
        async with running_broker(data_dir) as (_, _, port):
            client = await Client.connect(port)
            resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=32, resource_name="orders", configuration_keys=["consumer.session.timeout.ms"])]))
            [entry] = resp.results[0].configs
            assert (entry.value, entry.config_source) == ("50000", ConfigSource.DYNAMIC_GROUP_CONFIG)
    assert (data_dir / (TOPICS_FILE + MIGRATED_SUFFIX)).exists()
