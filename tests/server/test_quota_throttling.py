"""Client quota enforcement on a node, over the wire (KIP-219): throttle_time_ms in the answer,
the connection muted for that long (a later request on it waits), the response itself held for
request versions older than client-side throttling, empty throttled fetches, the request quota,
and nothing of that for a client without a quota.

Only lower bounds on waits are asserted (a loaded machine makes things slower, never faster)."""

from __future__ import annotations

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from tests.server.helpers import Client, batch, create_topic, running_broker

pytestmark = pytest.mark.timeout(120)


async def set_quota(c: Client, client_id: str, key: str, value: float) -> None:
    resp = await c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, AlterClientQuotasRequest(entries=[
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[AlterClientQuotasRequest.OpData(key=key, value=value)],
        )]))
    assert resp.entries[0].error_code == 0, resp


def produce(topic: str, size: int) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"x" * size))])])


async def timed(c: Client, api_key: int, version: int, msg: object, client_id: str) -> tuple[float, object]:
    start = trio.current_time()
    await c.send(api_key, version, msg, client_id=client_id)
    _, resp = await c.receive()
    return trio.current_time() - start, resp


async def test_over_the_producer_quota_answers_at_once_then_mutes_the_connection() -> None:
    async with running_broker(None) as (_, _, port):
        admin = await Client.connect(port)
        await create_topic(port, "t", 1)
        # 1,000 B/s: a 12,000-byte batch is 1,200 B/s over Kafka's ten-second minimum window,
        # throttled (1200 - 1000) / 1000 * 10 s = 2 s
        await set_quota(admin, "slow", "producer_byte_rate", 1000.0)
        c = await Client.connect(port)
        _, resp = await timed(c, ApiKey.PRODUCE, 9, produce("t", 12_000), "slow")
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert 1900 <= resp.throttle_time_ms <= 2100
        # the next request on that connection is read only after the throttle time
        waited, _ = await timed(c, ApiKey.METADATA, 9, MetadataRequest(topics=[]), "slow")
        assert waited >= 1.5
        # another client id on another connection is not held
        free = await Client.connect(port)
        _, resp = await timed(free, ApiKey.PRODUCE, 9, produce("t", 12_000), "free")
        assert resp.throttle_time_ms == 0


async def test_a_version_before_kip219_gets_its_response_held_instead() -> None:
    async with running_broker(None) as (_, _, port):
        admin = await Client.connect(port)
        await create_topic(port, "t", 1)
        await set_quota(admin, "old", "producer_byte_rate", 1000.0)
        c = await Client.connect(port)
        waited, resp = await timed(c, ApiKey.PRODUCE, 5, produce("t", 12_000), "old")
        assert resp.throttle_time_ms >= 1900
        assert waited >= 1.5  # Produce v5 clients do not wait on their own: the broker does


async def test_a_consumer_over_its_quota_gets_an_empty_throttled_fetch() -> None:
    async with running_broker(None) as (_, _, port):
        admin = await Client.connect(port)
        await create_topic(port, "t", 1)
        producer = await Client.connect(port)
        resp = await producer.request(ApiKey.PRODUCE, 9, produce("t", 30_000))
        assert resp.responses[0].partition_responses[0].error_code == 0
        await set_quota(admin, "reader", "consumer_byte_rate", 1000.0)

        def fetch() -> FetchRequest:
            return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
                FetchRequest.FetchTopic(topic="t", partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])

        c = await Client.connect(port)
        _, first = await timed(c, ApiKey.FETCH, 11, fetch(), "reader")
        [topic] = first.responses
        assert len(topic.partitions[0].records) > 30_000  # served, then counted
        assert first.throttle_time_ms > 0  # 3,000 B/s against 1,000
        second_conn = await Client.connect(port)  # (not muted: a new connection)
        _, second = await timed(second_conn, ApiKey.FETCH, 11, fetch(), "reader")
        assert second.throttle_time_ms > 0
        assert second.responses == []  # over the quota already: nothing read, nothing sent


async def test_the_request_quota_meters_handler_time() -> None:
    async with running_broker(None) as (_, _, port):
        admin = await Client.connect(port)
        await set_quota(admin, "busy", "request_percentage", 1e-9)
        c = await Client.connect(port)
        _, resp = await timed(c, ApiKey.METADATA, 9, MetadataRequest(topics=[]), "busy")
        # any handler time is far over 1e-9 percent; Kafka holds a request quota at one window
        assert resp.throttle_time_ms == 1000
        _, resp = await timed(admin, ApiKey.METADATA, 9, MetadataRequest(topics=[]), "test")
        assert resp.throttle_time_ms == 0


def create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=10_000, topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=-1)])


async def test_controller_mutations_are_refused_by_strict_versions_once_over_the_quota() -> None:
    async with running_broker(None) as (_, _, port):
        admin = await Client.connect(port)
        # 1 partition/s: a burst of 11; 15 partitions take the bucket to -4 (4 s to refill)
        await set_quota(admin, "ops", "controller_mutation_rate", 1.0)
        c = await Client.connect(port)
        _, resp = await timed(c, ApiKey.CREATE_TOPICS, 7, create("big", 15), "ops")
        assert resp.topics[0].error_code == 0
        assert 3900 <= resp.throttle_time_ms <= 4000
        # below zero: a strict version (v6+) is refused, on another connection too
        other = await Client.connect(port)
        _, resp = await timed(other, ApiKey.CREATE_TOPICS, 7, create("small", 1), "ops")
        assert resp.topics[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        assert resp.throttle_time_ms > 0
        again = await Client.connect(port)
        _, resp = await timed(again, ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(
            timeout_ms=10_000, topics=[DeleteTopicsRequest.DeleteTopicState(name="big")]), "ops")
        assert resp.responses[0].error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
        # an older version is never refused, only throttled
        old = await Client.connect(port)
        _, resp = await timed(old, ApiKey.CREATE_TOPICS, 5, create("older", 1), "ops")
        assert resp.topics[0].error_code == 0
        assert resp.throttle_time_ms > 0
        # another client id has its own bucket
        _, resp = await timed(admin, ApiKey.CREATE_TOPICS, 7, create("free", 1), "test")
        assert (resp.topics[0].error_code, resp.throttle_time_ms) == (0, 0)
