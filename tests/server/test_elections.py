"""ElectLeaders on a single node: every partition has one replica, which leads, so Kafka's
answer for an existing partition is ELECTION_NOT_NEEDED (both election types) - never
UNSUPPORTED_VERSION, which would make admin tools report the broker as too old."""

from __future__ import annotations

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from tests.server.helpers import Client, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)


def request(election_type: int, wanted: dict[str, list[int]] | None) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=election_type,
        topic_partitions=None
        if wanted is None
        else [
            ElectLeadersRequest.TopicPartitions(topic=t, partitions=p) for t, p in wanted.items()
        ],
    )


def outcome(response: ElectLeadersResponse) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.topic, p.partition_id): ErrorCode(p.error_code)
        for t in response.replica_election_results
        for p in t.partition_result
    }


async def test_single_node_election_is_never_needed() -> None:
    with trio.fail_after(30):
        async with running_broker(None) as (_, _, port):
            await create_topic(port, "one", 2)
            client = await Client.connect(port)
            try:
                wanted = {"one": [0, 1, 1, 5], "other": [0]}
                for version, election_type in ((0, 0), (1, 1), (2, 0), (2, 1)):
                    response = await client.request(
                        ApiKey.ELECT_LEADERS, version, request(election_type, wanted)
                    )
                    assert isinstance(response, ElectLeadersResponse)
                    assert response.error_code == ErrorCode.NONE
                    assert outcome(response) == {
                        ("one", 0): ErrorCode.ELECTION_NOT_NEEDED,
                        ("one", 1): ErrorCode.ELECTION_NOT_NEEDED,
                        ("one", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ("other", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    }
                    counts = [len(t.partition_result) for t in response.replica_election_results]
                    assert sum(counts) == 4  # a partition named twice is answered once
                everything = await client.request(ApiKey.ELECT_LEADERS, 2, request(0, None))
                assert outcome(everything) == {}
                assert "one" in {t.topic for t in everything.replica_election_results}
                bad = await client.request(ApiKey.ELECT_LEADERS, 2, request(5, {"one": [0]}))
                assert outcome(bad) == {("one", 0): ErrorCode.INVALID_REQUEST}
            finally:
                await client.aclose()
