"""Authorized operations (KIP-430) without an authorizer: every supported operation when asked,
the "not requested" sentinel otherwise - Metadata v8-12, DescribeCluster, DescribeTopicPartitions."""

from __future__ import annotations

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_OPERATIONS,
    TOPIC_OPERATIONS,
    AclOperation,
)
from kafkapy.protocol.messages import (
    DescribeClusterRequest,
    DescribeTopicPartitionsRequest,
    MetadataRequest,
)
from tests.server.helpers import Client, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)


def test_bit_fields_have_kafkas_operation_counts() -> None:
    assert bin(TOPIC_OPERATIONS).count("1") == 8
    assert bin(CLUSTER_OPERATIONS).count("1") == 7
    assert TOPIC_OPERATIONS & (1 << AclOperation.WRITE)
    assert CLUSTER_OPERATIONS & (1 << AclOperation.IDEMPOTENT_WRITE)


async def test_every_request_form_reports_all_supported_operations() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        c = await Client.connect(port)
        with trio.fail_after(20):
            want = [MetadataRequest.MetadataRequestTopic(name="t")]
            asked = {}
            for version in (8, 10, 12):
                req = MetadataRequest(topics=want, include_topic_authorized_operations=True,
                                      include_cluster_authorized_operations=True)
                asked[version] = await c.request(ApiKey.METADATA, version, req)
            plain = await c.request(ApiKey.METADATA, 10, MetadataRequest(topics=want))
            cluster = await c.request(ApiKey.DESCRIBE_CLUSTER, 0, DescribeClusterRequest(
                include_cluster_authorized_operations=True))
            partitions = await c.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")]))
        await c.aclose()
    for version, resp in asked.items():
        assert resp.topics[0].topic_authorized_operations == TOPIC_OPERATIONS, version
    assert asked[8].cluster_authorized_operations == CLUSTER_OPERATIONS
    assert plain.topics[0].topic_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert plain.cluster_authorized_operations == AUTHORIZED_OPERATIONS_OMITTED
    assert cluster.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert partitions.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
