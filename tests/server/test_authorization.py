"""Authorization of client APIs over the wire: what Kafka checks, with Kafka's error codes.

A PLAINTEXT connection's principal is User:ANONYMOUS; the tests give the node an authorizer
(allow.everyone.if.no.acl.found=false) and grant or deny that principal through ACLs added to
it directly, then speak to the broker as a client does.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from kafkapy.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import operations_bits
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.broker import Broker
from tests.server.helpers import Client, batch, create_topic, list_topics, running_broker

pytestmark = pytest.mark.timeout(90)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ME = "User:ANONYMOUS"


def grant(
    broker: Broker, op: AclOperation, name: str, *, rtype: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL, perm: AclPermissionType = ALLOW, principal: str = ME,
) -> uuid.UUID:
    acl_id = uuid.uuid4()
    assert broker.authorizer is not None
    broker.authorizer.add_acl(acl_id, AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, perm)))
    return acl_id


@asynccontextmanager
async def secured(topics: tuple[str, ...] = ("t",)) -> AsyncIterator[tuple[Broker, Client]]:
    """A node with `topics` (created before ACLs apply) whose authorizer then denies what no ACL allows."""
    async with running_broker(None) as (broker, _, port):
        for name in topics:
            await create_topic(port, name, 1)
        broker.authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=False)
        client = await Client.connect(port)
        try:
            with trio.fail_after(60):
                yield broker, client
        finally:
            await client.aclose()


async def produce(c: Client, topic: str, records: bytes | None = None, transactional_id: str | None = None) -> int:
    r = await c.request(ApiKey.PRODUCE, 9, ProduceRequest(
        acks=1, timeout_ms=5000, transactional_id=transactional_id,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records or batch(b"v"))])]))
    return int(r.responses[0].partition_responses[0].error_code)


async def fetch(c: Client, topic: str) -> Any:
    r = await c.request(ApiKey.FETCH, 11, FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return r.responses[0].partitions[0]


async def metadata(c: Client, topics: list[str] | None, **kw: Any) -> Any:
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in topics]
    return await c.request(ApiKey.METADATA, 12, MetadataRequest(topics=wanted, **kw))


async def test_produce_needs_write_on_the_topic_and_deny_wins() -> None:
    async with secured(("t", "logs-a")) as (broker, c):
        assert await produce(c, "t") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, Op.READ, "t")  # READ is not WRITE
        assert await produce(c, "t") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, Op.WRITE, "t")
        assert await produce(c, "t") == ErrorCode.NONE
        grant(broker, Op.WRITE, "logs-", pattern=PatternType.PREFIXED)
        assert await produce(c, "logs-a") == ErrorCode.NONE
        grant(broker, Op.ALL, "t", pattern=PatternType.PREFIXED, perm=DENY, principal="User:*")
        assert await produce(c, "t") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert await produce(c, "logs-a") == ErrorCode.NONE


async def test_produce_to_an_unknown_topic_creates_it_only_with_create() -> None:
    async with secured() as (broker, c):
        grant(broker, Op.WRITE, "new", pattern=PatternType.PREFIXED)
        assert await produce(c, "new-1") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "new-1" not in await list_topics_as_admin(broker, c)
        grant(broker, Op.CREATE, "new-2")
        assert await produce(c, "new-2") == ErrorCode.NONE


async def list_topics_as_admin(broker: Broker, c: Client) -> set[str]:
    return {t.name for t in broker.topics.all()}


async def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    async with secured() as (broker, c):
        grant(broker, Op.WRITE, "t")
        txn_batch = build_batch([Record(0, 0, None, b"v", [])], base_timestamp=0, producer_id=1,
                                producer_epoch=0, base_sequence=0, is_transactional=True)
        assert await produce(c, "t", txn_batch, "tx") == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # transactional batches without a transactional id are refused the same way
        assert await produce(c, "t", txn_batch) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        grant(broker, Op.WRITE, "tx", rtype=ResourceType.TRANSACTIONAL_ID)
        # past authorization: the coordinator knows no such transaction
        assert await produce(c, "t", txn_batch, "tx") != ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_fetch_needs_read_and_a_follower_fetch_cluster_action() -> None:
    async with secured() as (broker, c):
        grant(broker, Op.WRITE, "t")
        assert await produce(c, "t") == ErrorCode.NONE
        assert (await fetch(c, "t")).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, Op.READ, "t")
        part = await fetch(c, "t")
        assert part.error_code == ErrorCode.NONE
        assert part.records
        follower = FetchRequest(
            replica_id=broker.node_id + 1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        r = await c.request(ApiKey.FETCH, 11, follower)
        assert r.responses[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_metadata_hides_what_the_principal_may_not_describe() -> None:
    async with secured(("open", "secret")) as (broker, c):
        grant(broker, Op.READ, "open")  # READ implies DESCRIBE
        listed = await metadata(c, None)
        assert [t.name for t in listed.topics] == ["open"]
        named = await metadata(c, ["open", "secret", "missing"], allow_auto_topic_creation=False)
        codes = {t.name: t.error_code for t in named.topics}
        assert codes == {
            "open": ErrorCode.NONE,
            "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "missing": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
        grant(broker, Op.DESCRIBE, "auto", pattern=PatternType.PREFIXED)
        # auto-creation needs CREATE on the cluster or the topic
        refused = await metadata(c, ["auto-1"], allow_auto_topic_creation=True)
        assert refused.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert broker.topics.get("auto-1") is None
        grant(broker, Op.CREATE, "kafka-cluster", rtype=ResourceType.CLUSTER)
        created = await metadata(c, ["auto-1"], allow_auto_topic_creation=True)
        assert created.topics[0].error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
        assert broker.topics.get("auto-1") is not None


async def test_metadata_reports_the_principals_authorized_operations() -> None:
    async with secured() as (broker, c):
        grant(broker, Op.READ, "t")
        grant(broker, Op.ALTER_CONFIGS, "t")
        r = await c.request(ApiKey.METADATA, 10, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="t")],
            include_topic_authorized_operations=True, include_cluster_authorized_operations=True))
        assert r.topics[0].topic_authorized_operations == operations_bits(
            [Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
        assert r.cluster_authorized_operations == 0


async def test_list_offsets_and_offset_for_leader_epoch_need_describe() -> None:
    async with secured() as (broker, c):
        lo = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        ofle = OffsetForLeaderEpochRequest(topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic="t", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])])
        assert (await c.request(ApiKey.LIST_OFFSETS, 7, lo)).topics[0].partitions[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        assert (await c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, ofle)).topics[0].partitions[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        grant(broker, Op.DESCRIBE, "t")
        assert (await c.request(ApiKey.LIST_OFFSETS, 7, lo)).topics[0].partitions[0].error_code == ErrorCode.NONE
        assert (await c.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, ofle)).topics[0].partitions[0].error_code == (
            ErrorCode.NONE)


async def test_without_an_authorizer_nothing_is_refused() -> None:
    async with running_broker(None) as (broker, _, port):
        assert broker.authorizer is None
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert await produce(c, "anything") == ErrorCode.NONE
            assert (await fetch(c, "anything")).error_code == ErrorCode.NONE
            assert "anything" in await list_topics(port)
        await c.aclose()
