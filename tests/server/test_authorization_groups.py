"""Authorization of group, offset and transaction APIs over the wire (Kafka's checks and codes).

As test_authorization.py: the PLAINTEXT principal User:ANONYMOUS, ACLs added to the node's
authorizer directly, allow.everyone.if.no.acl.found=false.
"""

from __future__ import annotations

import pytest

from kafkapy.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    WriteTxnMarkersRequest,
)
from tests.server.helpers import Client
from tests.server.test_authorization import grant, secured

pytestmark = pytest.mark.timeout(90)

Op = AclOperation
DENY = AclPermissionType.DENY
GROUP, TXN, CLUSTER = ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER


async def find(c: Client, key: str, key_type: int = 0) -> int:
    r = await c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]))
    return int(r.coordinators[0].error_code)


async def join(c: Client, group: str) -> int:
    r = await c.request(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
        group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]))
    return int(r.error_code)


async def commit(c: Client, group: str, topic: str) -> int:
    r = await c.request(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]))
    return int(r.topics[0].partitions[0].error_code)


async def test_group_membership_needs_read_on_the_group() -> None:
    async with secured() as (broker, c):
        assert await find(c, "g") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert await join(c, "g") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(broker, Op.READ, "g", rtype=GROUP)
        assert await find(c, "g") == ErrorCode.NONE  # READ implies DESCRIBE
        assert await join(c, "g") == ErrorCode.MEMBER_ID_REQUIRED  # past authorization
        grant(broker, Op.READ, "g", rtype=GROUP, perm=DENY)
        assert await join(c, "g") == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_offset_commit_and_fetch_need_the_group_and_the_topic() -> None:
    async with secured(("t", "hidden")) as (broker, c):
        assert await commit(c, "g", "t") == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(broker, Op.READ, "g", rtype=GROUP)
        assert await find(c, "g") == ErrorCode.NONE  # creates __consumer_offsets, as clients do first
        assert await commit(c, "g", "t") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        grant(broker, Op.READ, "t")
        assert await commit(c, "g", "t") == ErrorCode.NONE
        named = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id="g", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=[0]) for n in ("t", "hidden")]))
        assert {t.name: t.partitions[0].error_code for t in named.topics} == {
            "t": ErrorCode.NONE, "hidden": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        grant(broker, Op.READ, "hidden")
        assert await commit(c, "g", "hidden") == ErrorCode.NONE
        grant(broker, Op.DESCRIBE, "hidden", perm=DENY)  # (a DENY of READ would not hide it)
        # all of the group's offsets: topics the principal may not describe are left out
        every = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id="g", topics=None))
        assert [t.name for t in every.topics] == ["t"]
        other = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id="other", topics=None))
        assert other.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


async def test_describe_list_and_delete_groups() -> None:
    async with secured() as (broker, c):
        grant(broker, Op.READ, "mine", rtype=GROUP)
        grant(broker, Op.READ, "t")
        assert await find(c, "mine") == ErrorCode.NONE
        assert await commit(c, "mine", "t") == ErrorCode.NONE
        grant(broker, Op.READ, "theirs", rtype=GROUP)
        assert await commit(c, "theirs", "t") == ErrorCode.NONE
        grant(broker, Op.DESCRIBE, "theirs", rtype=GROUP, perm=DENY)
        described = await c.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=["mine", "theirs"], include_authorized_operations=True))
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            ("mine", ErrorCode.NONE), ("theirs", ErrorCode.GROUP_AUTHORIZATION_FAILED)]
        assert described.groups[0].authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
        listed = await c.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
        assert [g.group_id for g in listed.groups] == ["mine"]
        grant(broker, Op.DESCRIBE, "kafka-cluster", rtype=CLUSTER)
        listed = await c.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
        assert sorted(g.group_id for g in listed.groups) == ["mine", "theirs"]
        deleted = await c.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["mine"]))
        assert deleted.results[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        grant(broker, Op.DELETE, "mi", rtype=GROUP, pattern=PatternType.PREFIXED)
        deleted = await c.request(ApiKey.DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=["mine"]))
        assert deleted.results[0].error_code == ErrorCode.NONE


async def test_consumer_group_describe_hides_a_group_assigned_a_topic_the_principal_may_not_describe() -> None:
    async with secured(("t",)) as (broker, c):
        grant(broker, Op.READ, "g", rtype=GROUP)
        grant(broker, Op.DESCRIBE, "t")
        assert await find(c, "g") == ErrorCode.NONE
        joined = await c.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, ConsumerGroupHeartbeatRequest(
            group_id="g", member_epoch=0, rebalance_timeout_ms=10000, subscribed_topic_names=["t"]))
        assert joined.error_code == ErrorCode.NONE
        describe = ConsumerGroupDescribeRequest(group_ids=["g"])
        shown = (await c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, describe)).groups[0]
        assert shown.error_code == ErrorCode.NONE
        assert [p.topic_name for m in shown.members for p in m.assignment.topic_partitions] == ["t"]
        grant(broker, Op.DESCRIBE, "t", perm=DENY)
        hidden = (await c.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, describe)).groups[0]
        assert hidden.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert hidden.members == []


async def test_producer_ids_need_idempotent_write_or_write_on_some_topic() -> None:
    async with secured() as (broker, c):
        idempotent = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        r = await c.request(ApiKey.INIT_PRODUCER_ID, 4, idempotent)
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        grant(broker, Op.WRITE, "t")  # KIP-679: WRITE on any topic is enough
        r = await c.request(ApiKey.INIT_PRODUCER_ID, 4, idempotent)
        assert r.error_code == ErrorCode.NONE
        assert r.producer_id >= 0
        transactional = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
        r = await c.request(ApiKey.INIT_PRODUCER_ID, 4, transactional)
        assert r.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert await find(c, "tx", key_type=1) == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_transaction_apis_need_write_on_the_transactional_id() -> None:
    async with secured(("t", "u")) as (broker, c):
        end = await c.request(ApiKey.END_TXN, 3, EndTxnRequest(transactional_id="tx", producer_id=1, producer_epoch=0))
        assert end.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        add_offsets = AddOffsetsToTxnRequest(transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g")
        assert (await c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)).error_code == (
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=n, partitions=[0]) for n in ("t", "u")])
        grant(broker, Op.WRITE, "tx", rtype=TXN)
        grant(broker, Op.WRITE, "t")
        r = await c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
        assert {t.name: t.results_by_partition[0].partition_error_code for t in r.results_by_topic_v3_and_below} == {
            "t": ErrorCode.OPERATION_NOT_ATTEMPTED, "u": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        assert (await c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)).error_code == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED)
        described = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["tx", "other"]))
        mine, other = described.transaction_states
        assert mine.error_code != ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # WRITE implies DESCRIBE
        assert other.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_broker_only_transaction_apis_need_cluster_action() -> None:
    async with secured() as (_, c):
        markers = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="t", partition_indexes=[0])])])
        r = await c.request(ApiKey.WRITE_TXN_MARKERS, 1, markers)
        assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        r = await c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, AddPartitionsToTxnRequest(transactions=[]))
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
