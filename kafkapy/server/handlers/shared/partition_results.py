"""Per-partition results grouped into the answers that both a broker listener and the controller
listener (`controller_apis.py`) send: ElectLeaders (`elections.py`) and
AlterPartitionReassignments (`reassignments.py`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from kafkapy.protocol.messages.elect_leaders import ElectLeadersResponse_PartitionResult

__all__ = ["alter_reassignments_response", "election_response", "requested_partitions"]


def requested_partitions(req: ElectLeadersRequest) -> list[tuple[str, int]] | None:
    """(topic, partition) pairs in request order, duplicates dropped; None = all partitions."""
    if req.topic_partitions is None:
        return None
    seen: dict[tuple[str, int], None] = {}
    for t in req.topic_partitions:
        for p in t.partitions:
            seen.setdefault((t.topic, p), None)
    return list(seen)


def election_response(
    results: Iterable[tuple[str, int, ErrorCode, str | None]],
    topics: Sequence[str] = (),
) -> ElectLeadersResponse:
    """Group per-partition results by topic (in first-seen order); `topics` listed first get an
    entry even without results (Kafka's answer to a null partition list names every topic)."""
    by_topic: dict[str, list[ElectLeadersResponse_PartitionResult]] = {t: [] for t in topics}
    for topic, partition, error, message in results:
        by_topic.setdefault(topic, []).append(
            ElectLeadersResponse.PartitionResult(
                partition_id=partition, error_code=error, error_message=message
            )
        )
    return ElectLeadersResponse(
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=parts)
            for t, parts in by_topic.items()
        ]
    )


def alter_reassignments_response(
    results: list[tuple[str, int, ErrorCode, str | None]],
) -> AlterPartitionReassignmentsResponse:
    """Group per-partition results by topic, in first-seen order."""
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, error, message in results:
        by_topic.setdefault(topic, []).append(
            AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                partition_index=partition, error_code=error, error_message=message
            )
        )
    return AlterPartitionReassignmentsResponse(
        responses=[
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t, partitions=parts)
            for t, parts in by_topic.items()
        ]
    )
