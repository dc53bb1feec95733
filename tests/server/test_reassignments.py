"""Partition reassignment on a single node: the only broker holds every partition, so a target
of just this broker has nothing to move (NONE), any other broker is INVALID_REPLICA_ASSIGNMENT,
a cancel is NO_REASSIGNMENT_IN_PROGRESS, and nothing is ever listed as in progress - never
UNSUPPORTED_VERSION, which admin tools would report as a broker too old."""

from __future__ import annotations

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from tests.server.helpers import Client, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)


async def test_single_node_reassignments() -> None:
    with trio.fail_after(30):
        async with running_broker(None) as (broker, _, port):
            await create_topic(port, "one", 1)
            client = await Client.connect(port)
            try:
                moves = [(0, [broker.node_id]), (0, [broker.node_id, 7]), (0, None), (3, [1])]
                request = AlterPartitionReassignmentsRequest(
                    topics=[
                        AlterPartitionReassignmentsRequest.ReassignableTopic(
                            name="one",
                            partitions=[
                                AlterPartitionReassignmentsRequest.ReassignablePartition(
                                    partition_index=p, replicas=r
                                )
                                for p, r in moves
                            ],
                        )
                    ]
                )
                response = await client.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request)
                assert isinstance(response, AlterPartitionReassignmentsResponse)
                assert response.error_code == ErrorCode.NONE
                assert [p.error_code for p in response.responses[0].partitions] == [
                    ErrorCode.NONE,
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ]
                listed = await client.request(
                    ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, ListPartitionReassignmentsRequest()
                )
                assert isinstance(listed, ListPartitionReassignmentsResponse)
                assert (listed.error_code, listed.topics) == (ErrorCode.NONE, [])
            finally:
                await client.aclose()
