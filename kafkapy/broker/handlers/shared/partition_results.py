"""Per-partition results grouped into the answers that both a broker listener and the controller
listener (the `_on_controller` handlers) send: ElectLeaders (`elections.py`) and
AlterPartitionReassignments (`reassignments.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)

__all__ = [
    "PartitionResult",
    "alter_reassignments_response",
    "election_response",
    "requested_partitions",
]

T = TypeVar("T")


def requested_partitions(req: ElectLeadersRequest) -> list[tuple[str, int]] | None:
    """(topic, partition) pairs in request order, duplicates dropped; None = all partitions."""
    if req.topic_partitions is None:
        return None
    seen: dict[tuple[str, int], None] = {}
    for t in req.topic_partitions:
        for p in t.partitions:
            seen.setdefault((t.topic, p), None)
    return list(seen)


PartitionResult = tuple[str, int, ErrorCode, str | None]


def _by_topic(
    results: Iterable[PartitionResult],
    entry: Callable[[int, ErrorCode, str | None], T],
    topics: Sequence[str] = (),
) -> dict[str, list[T]]:
    """Per-partition entries grouped by topic in first-seen order; `topics` come first, each with
    an entry even when it has no results."""
    by_topic: dict[str, list[T]] = {t: [] for t in topics}
    for topic, partition, error, message in results:
        by_topic.setdefault(topic, []).append(entry(partition, error, message))
    return by_topic


def election_response(
    results: Iterable[PartitionResult], topics: Sequence[str] = ()
) -> ElectLeadersResponse:
    """ElectLeaders' answer; `topics` listed first get an entry even without results (Kafka's
    answer to a null partition list names every topic)."""
    by_topic = _by_topic(
        results,
        lambda p, error, message: ElectLeadersResponse.PartitionResult(
            partition_id=p, error_code=error, error_message=message
        ),
        topics,
    )
    return ElectLeadersResponse(
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=parts)
            for t, parts in by_topic.items()
        ]
    )


def alter_reassignments_response(
    results: Iterable[PartitionResult],
) -> AlterPartitionReassignmentsResponse:
    """AlterPartitionReassignments' answer."""
    by_topic = _by_topic(
        results,
        lambda p, error, message: AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
            partition_index=p, error_code=error, error_message=message
        ),
    )
    return AlterPartitionReassignmentsResponse(
        responses=[
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t, partitions=parts)
            for t, parts in by_topic.items()
        ]
    )
