"""What a node keeps across a restart (clean or not) and the errors topic administration gives."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.metadata_store import MetaProperties, topic_name_error
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest
from kafkapy.storage.errors import StorageError

from .helpers import (
    IO_TIMEOUT_S,
    Client,
    TopicRequestError,
    alter_topic_configs,
    create_partitions,
    create_topic,
    delete_topic,
    list_topics,
    running_broker,
    topic_overrides,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
#: the topic table a single node kept before the metadata log held its topics
LEGACY_TOPIC_TABLE = "kafkapy-topics.json"
TRANSACTIONS_ON_ONE_PARTITION = {"transaction.state.log.num.partitions": "1"}


async def test_topics_configs_and_ids_persist(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        created = await create_topic(port, "orders", 3, {"cleanup.policy": "compact"})
        client = await Client.connect(port)
        cluster_id = (await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))).cluster_id
    async with running_broker(tmp_path) as (again, _, port):
        listed = (await list_topics(port))["orders"]
        assert (listed.topic_id, listed.partitions) == (created.topic_id, 3)
        assert await topic_overrides(port, "orders") == {"cleanup.policy": "compact"}
        client = await Client.connect(port)
        by_id = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=created.topic_id)])
        md = await client.request(ApiKey.METADATA, 12, by_id)
        assert [(t.name, t.error_code, t.topic_id) for t in md.topics] == [("orders", 0, created.topic_id)]
        assert md.cluster_id == cluster_id
        plog = again.partition_log("orders", 0)
        assert plog is not None
        assert plog.config.cleanup_policy == "compact"


CRASH_SCRIPT = """
import os, sys
from pathlib import Path
import trio
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import ProduceRequest
from tests.server.helpers import Client, batch, create_topic, running_broker

async def main() -> None:
    async with running_broker(Path(sys.argv[1])) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        produce = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"a", b"b"))])])
        resp = await client.request(ApiKey.PRODUCE, 9, produce)
        assert resp.responses[0].partition_responses[0].error_code == 0, resp
        os._exit(0)  # a crash: no flush, no checkpoint, no clean-shutdown marker

trio.run(main)
"""


async def test_unclean_restart_exposes_every_recovered_message(tmp_path: Path) -> None:
    crash = [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)]
    done = await trio.run_process(crash, cwd=REPO, check=False, capture_stderr=True)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    async with running_broker(tmp_path) as (again, _, _):
        reopened = again.partition_log("t", 0)
        assert reopened is not None
        assert (reopened.log_end_offset, reopened.high_watermark) == (2, 2)


async def test_deleted_topic_leftovers_are_removed_at_start(tmp_path: Path) -> None:
    data, aside = tmp_path / "data", tmp_path / "aside"
    async with running_broker(data) as (_, _, port):
        await create_topic(port, "gone", 2)
    aside.mkdir()
    for p in (0, 1):
        shutil.copytree(data / f"gone-{p}", aside / f"gone-{p}")
    async with running_broker(data) as (_, _, port):
        await delete_topic(port, "gone")
    # a crash after the deletion was recorded but before the logs were removed leaves them behind
    for p in (0, 1):
        shutil.copytree(aside / f"gone-{p}", data / f"gone-{p}")
    async with running_broker(data) as (again, _, port):
        assert "gone" not in await list_topics(port)
        assert again.partition_log("gone", 0) is None
        assert not (data / "gone-0").exists()
        assert not (data / "gone-1").exists()


async def test_data_dir_without_topic_table_is_adopted(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        created = await create_topic(port, "old", 2, {"retention.ms": "5"})
    (tmp_path / LEGACY_TOPIC_TABLE).unlink(missing_ok=True)
    async with running_broker(tmp_path) as (_, _, port):
        listed = (await list_topics(port))["old"]
        assert (listed.partitions, listed.topic_id) == (2, created.topic_id)
        assert await topic_overrides(port, "old") == {"retention.ms": "5"}


def test_node_id_mismatch_is_refused(tmp_path: Path) -> None:
    MetaProperties.load_or_create(tmp_path, 1)
    with pytest.raises(ValueError, match=r"node\.id=1"):
        MetaProperties.load_or_create(tmp_path, 2)


async def _init_transactional_producer(port: int) -> None:
    """FindCoordinator and InitProducerId for a transactional id, as a client retries them, until
    both answer: `__transaction_state` exists."""
    client = await Client.connect(port)
    find = FindCoordinatorRequest(key="tx", key_type=1)
    init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    with trio.fail_after(IO_TIMEOUT_S):
        while True:
            found = await client.request(ApiKey.FIND_COORDINATOR, 3, find)
            if found.error_code == 0 and (await client.request(ApiKey.INIT_PRODUCER_ID, 4, init)).error_code == 0:
                break
            await trio.sleep(0.05)
    await client.aclose()


async def test_topic_errors(tmp_path: Path) -> None:
    async with running_broker(tmp_path, **TRANSACTIONS_ON_ONE_PARTITION) as (_, _, port):
        await create_topic(port, "a.b", 1)
        await _init_transactional_producer(port)
        assert (await list_topics(port))["__transaction_state"].internal
        cases = [
            (lambda: create_topic(port, "a.b"), ErrorCode.TOPIC_ALREADY_EXISTS),
            (lambda: create_topic(port, "a_b"), ErrorCode.INVALID_TOPIC_EXCEPTION),
            (lambda: create_topic(port, "bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
            (lambda: create_topic(port, "x", 0), ErrorCode.INVALID_PARTITIONS),
            (lambda: create_topic(port, "y", 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
            (lambda: create_topic(port, "z", 1, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
            (lambda: delete_topic(port, "missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (lambda: create_partitions(port, "a.b", 1), ErrorCode.INVALID_PARTITIONS),
            (lambda: delete_topic(port, "__transaction_state"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        ]
        for call, code in cases:
            with pytest.raises(TopicRequestError) as err:
                await call()
            assert err.value.error_code == code
        listed = await list_topics(port)
        assert {name for name, t in listed.items() if not t.internal} == {"a.b"}
        assert listed["__transaction_state"].internal


async def test_live_config_update_reaches_the_log(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        await create_topic(port, "t", 2)
        configs = {"retention.ms": "1000", "max.message.bytes": "100", "message.timestamp.type": "LogAppendTime"}
        await alter_topic_configs(port, "t", configs)
        for p in (0, 1):
            plog = broker.partition_log("t", p)
            assert plog is not None
            await wait_until(lambda log=plog: log.config.retention_ms == 1000, f"retention.ms reaches t-{p}")
            assert (plog.config.retention_ms, plog.config.max_message_bytes, plog.config.log_append_time) == (1000, 100, True)


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_topic_name_rules(name: str) -> None:
    legal = (
        0 < len(name) <= 249
        and name not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    )
    assert (topic_name_error(name) is None) == legal


async def test_a_data_dir_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    async with running_broker(tmp_path):
        with pytest.raises((ValueError, StorageError), match="in use"):
            async with running_broker(tmp_path):
                pass
    async with running_broker(tmp_path):
        pass
