"""Authorization of admin and cluster APIs over the wire (Kafka's checks and codes).

As test_authorization.py: the PLAINTEXT principal User:ANONYMOUS, ACLs added to the node's
authorizer directly, allow.everyone.if.no.acl.found=false.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.authorizer import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAuthorizer,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    BrokerHeartbeatRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeQuorumRequest,
    DescribeTopicPartitionsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListPartitionReassignmentsRequest,
)
from kafkapy.server.cluster.peer import PeerError
from kafkapy.testing.local import open_cluster
from tests.server.cluster.controller_helpers import call
from tests.server.test_authorization import grant, secured

pytestmark = pytest.mark.timeout(90)

Op = AclOperation
CLUSTER = ResourceType.CLUSTER
TOPIC_RES, BROKER_RES, GROUP_RES = 2, 4, 32  # config resource types


def _create(*names: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(timeout_ms=10000, topics=[
        CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=-1) for n in names])


async def test_topic_administration_needs_create_delete_alter() -> None:
    async with secured(("t",)) as (broker, c):
        grant(broker, Op.CREATE, "ok-", pattern=PatternType.PREFIXED)
        r = await c.request(ApiKey.CREATE_TOPICS, 7, _create("ok-1", "nope"))
        assert {t.name: t.error_code for t in r.topics} == {
            "ok-1": ErrorCode.NONE, "nope": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        # v5+ configs need DESCRIBE_CONFIGS on the new topic
        assert next(t for t in r.topics if t.name == "ok-1").topic_config_error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        assert broker.topics.get("nope") is None
        grant(broker, Op.CREATE, "kafka-cluster", rtype=CLUSTER)
        r = await c.request(ApiKey.CREATE_TOPICS, 7, _create("nope"))
        assert r.topics[0].error_code == ErrorCode.NONE

        grow = CreatePartitionsRequest(timeout_ms=10000, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=2)])
        assert (await c.request(ApiKey.CREATE_PARTITIONS, 3, grow)).results[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        grant(broker, Op.ALTER, "t")
        assert (await c.request(ApiKey.CREATE_PARTITIONS, 3, grow)).results[0].error_code == ErrorCode.NONE

        trim = DeleteRecordsRequest(timeout_ms=10000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name="t", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])])
        assert (await c.request(ApiKey.DELETE_RECORDS, 2, trim)).topics[0].partitions[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        delete = DeleteTopicsRequest(timeout_ms=10000, topics=[DeleteTopicsRequest.DeleteTopicState(name="t")])
        assert (await c.request(ApiKey.DELETE_TOPICS, 6, delete)).responses[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        grant(broker, Op.DELETE, "t")
        assert (await c.request(ApiKey.DELETE_RECORDS, 2, trim)).topics[0].partitions[0].error_code == ErrorCode.NONE
        assert (await c.request(ApiKey.DELETE_TOPICS, 6, delete)).responses[0].error_code == ErrorCode.NONE


async def test_configs_need_describe_configs_and_alter_configs() -> None:
    async with secured(("t",)) as (broker, c):
        describe = DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC_RES, resource_name="t"),
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER_RES, resource_name=str(broker.node_id)),
        ])
        r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, describe)
        assert [x.error_code for x in r.results] == [
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
        alter = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_RES, resource_name="t", configs=[IncrementalAlterConfigsRequest.AlterableConfig(
                name="retention.ms", config_operation=0, value="60000")])])
        assert (await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)).responses[0].error_code == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        grant(broker, Op.ALTER_CONFIGS, "t")  # implies DESCRIBE_CONFIGS
        grant(broker, Op.DESCRIBE_CONFIGS, "kafka-cluster", rtype=CLUSTER)
        r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, describe)
        assert [x.error_code for x in r.results] == [ErrorCode.NONE, ErrorCode.NONE]
        assert (await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)).responses[0].error_code == ErrorCode.NONE


def _group_session(group: str, value: str) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=GROUP_RES, resource_name=group, configs=[IncrementalAlterConfigsRequest.AlterableConfig(
            name="consumer.session.timeout.ms", config_operation=0, value=value)])])


async def test_group_configs_need_describe_configs_and_alter_configs_on_the_group() -> None:
    """KIP-848 group configs are authorized on the GROUP resource, as Kafka does: a cluster-wide
    grant does not open them, a refused alter stores nothing, ALTER_CONFIGS implies DESCRIBE_CONFIGS,
    and a grant on one group opens no other."""
    async with secured(()) as (broker, c):
        def describe(*groups: str) -> DescribeConfigsRequest:
            return DescribeConfigsRequest(resources=[
                DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP_RES, resource_name=g)
                for g in groups])

        grant(broker, Op.ALTER_CONFIGS, "kafka-cluster", rtype=CLUSTER)
        r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, describe("g"))
        assert (r.results[0].error_code, r.results[0].configs) == (ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
        for version in (0, 1):
            r = await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, _group_session("g", "50000"))
            assert r.responses[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        legacy = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=GROUP_RES, resource_name="g", configs=[AlterConfigsRequest.AlterableConfig(
                name="consumer.session.timeout.ms", value="50000")])])
        assert (await c.request(ApiKey.ALTER_CONFIGS, 2, legacy)).responses[0].error_code == (
            ErrorCode.GROUP_AUTHORIZATION_FAILED)
        assert "g" not in broker.config.group_configs

        grant(broker, Op.DESCRIBE_CONFIGS, "g", rtype=ResourceType.GROUP)
        r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, describe("g"))
        assert r.results[0].error_code == ErrorCode.NONE
        assert (await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _group_session("g", "50000"))).responses[
            0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED  # describing is not altering

        grant(broker, Op.ALTER_CONFIGS, "app-", rtype=ResourceType.GROUP, pattern=PatternType.PREFIXED)
        r = await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, _group_session("app-1", "50000"))
        assert r.responses[0].error_code == ErrorCode.NONE
        assert (await c.request(ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest(resources=[
            AlterConfigsRequest.AlterConfigsResource(resource_type=GROUP_RES, resource_name="app-2", configs=[
                AlterConfigsRequest.AlterableConfig(name="consumer.session.timeout.ms", value="55000")])]))
                ).responses[0].error_code == ErrorCode.NONE
        r = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, describe("app-1", "app-2", "other"))
        assert [x.error_code for x in r.results] == [
            ErrorCode.NONE, ErrorCode.NONE, ErrorCode.GROUP_AUTHORIZATION_FAILED]
        assert [next(e.value for e in x.configs if e.name == "consumer.session.timeout.ms")
                for x in r.results[:2]] == ["50000", "55000"]


async def test_cluster_apis_need_alter_or_describe_on_the_cluster() -> None:
    async with secured(("t",)) as (broker, c):
        elect = ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
            ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0])])
        assert (await c.request(ApiKey.ELECT_LEADERS, 2, elect)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        log_dirs = await c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))
        assert log_dirs.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        quorum = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
            topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
        assert (await c.request(ApiKey.DESCRIBE_QUORUM, 2, quorum)).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        listing = ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None)
        assert (await c.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)).error_code == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        cluster = await c.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=True))
        assert cluster.error_code == ErrorCode.NONE
        assert cluster.cluster_authorized_operations == 0
        grant(broker, Op.ALTER, "kafka-cluster", rtype=CLUSTER)  # implies DESCRIBE
        assert (await c.request(ApiKey.ELECT_LEADERS, 2, elect)).error_code != ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert (await c.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))).error_code == (
            ErrorCode.NONE)
        assert (await c.request(ApiKey.DESCRIBE_QUORUM, 2, quorum)).error_code == ErrorCode.NONE
        cluster = await c.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest(include_cluster_authorized_operations=True))
        assert cluster.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)


async def test_describe_topic_partitions_shows_only_describable_topics() -> None:
    async with secured(("open", "secret")) as (broker, c):
        grant(broker, Op.DESCRIBE, "open")
        grant(broker, Op.ALL, "secret", perm=AclPermissionType.DENY, principal="User:*")
        every = await c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=100))
        assert [t.name for t in every.topics] == ["open"]
        assert every.topics[0].topic_authorized_operations == 1 << Op.DESCRIBE
        named = await c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(
            topics=[DescribeTopicPartitionsRequest.TopicRequest(name="secret")], response_partition_limit=100))
        assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def test_the_controller_listener_needs_cluster_action(tmp_path: Path) -> None:
    """Only the cluster's nodes (super users or CLUSTER_ACTION holders) may speak to the
    controller listener: registrations, heartbeats and forwarded admin requests alike."""
    with trio.fail_after(60):
        async with open_cluster(tmp_path, 1) as (node,):
            epoch = node.broker.cluster.lifecycle.broker_epoch  # type: ignore[union-attr]
            heartbeat = BrokerHeartbeatRequest(broker_id=node.node_id, broker_epoch=epoch, current_metadata_offset=0)
            node.broker.authorizer = StandardAuthorizer()
            refused = await call(node.controller_port, ApiKey.BROKER_HEARTBEAT, 1, heartbeat)
            assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            # CreateTopics has no top-level error code: the refusal is a logged close
            with pytest.raises(PeerError):
                await call(node.controller_port, ApiKey.CREATE_TOPICS, 7, _create("sneaky"))
            assert node.broker.topics.get("sneaky") is None
            # the node's own in-process calls are not affected
            assert node.broker.cluster.lifecycle.broker_epoch == epoch  # type: ignore[union-attr]
            node.broker.authorizer = StandardAuthorizer(super_users=["User:ANONYMOUS"])
            answered = await call(node.controller_port, ApiKey.BROKER_HEARTBEAT, 1, heartbeat)
            assert answered.error_code == ErrorCode.NONE


async def test_client_quotas_need_describe_configs_and_alter_configs_on_the_cluster() -> None:
    async with secured(()) as (broker, c):
        describe = DescribeClientQuotasRequest(components=[], strict=False)
        alter = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type="user", entity_name="alice")],
            ops=[AlterClientQuotasRequest.OpData(key="producer_byte_rate", value=1024.0, remove=False)])])
        assert (await c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe)).error_code == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        assert (await c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter)).entries[0].error_code == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        grant(broker, Op.ALTER_CONFIGS, "kafka-cluster", rtype=CLUSTER)  # implies DESCRIBE_CONFIGS
        assert (await c.request(ApiKey.ALTER_CLIENT_QUOTAS, 1, alter)).entries[0].error_code == ErrorCode.NONE
        described = await c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, describe)
        assert described.error_code == ErrorCode.NONE
        assert [v.value for e in described.entries for v in e.values] == [1024.0]
