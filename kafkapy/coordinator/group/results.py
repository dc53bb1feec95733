"""Values the group coordinator takes and returns: configuration, results and responses.

Why domain types rather than the wire messages: the coordinator must not depend on the codec's
per-version message shapes (the tansu lesson), and the cluster issue will drive the same state
machine from a replicated log, so handlers translate wire <-> these values at the edge.

Every operation returns `Result(response, records, completions)`:

- `records`: what to append to `__consumer_offsets`; they were already replayed into the
  coordinator's state (Kafka's runtime replays on write and answers once the write is durable).
- `response`: the answer to this request, or `PENDING` when it completes later (a JoinGroup
  waits for the rebalance, a SyncGroup for the leader's assignment).
- `completions`: answers to *earlier* pending requests that this operation (or timer) finished,
  keyed by the `request_id` the server passed in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from kafkapy.coordinator.group.records import GroupRecord
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "PENDING",
    "Completion",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "JoinGroupResult",
    "JoinedMember",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "ListedGroup",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "OffsetToCommit",
    "Pending",
    "Result",
    "SyncGroupResult",
    "TopicPartition",
]

T = TypeVar("T")


class Pending(enum.Enum):
    """Marker for a response that a later operation or timer completes."""

    PENDING = "pending"


PENDING = Pending.PENDING


class TopicPartition(NamedTuple):
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Kafka's group/offset broker settings (names are the snake_case of Kafka's keys).

    `initial_rebalance_delay_ms` keeps Kafka's 3 s default here; `kafkapy serve` passes 0 so a
    lone consumer in development is not kept waiting.
    """

    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    # KIP-848 consumer groups (group.consumer.*)
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_size: int = 2**31 - 1
    # bounds of the per-group overrides (group.consumer.min/max.*)
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    # KIP-932 share groups' defaults and bounds (group.share.*): kafkapy has no share groups,
    # these check the share.* group configs Kafka 4.0 stores
    share_session_timeout_ms: int = 45000
    share_min_session_timeout_ms: int = 45000
    share_max_session_timeout_ms: int = 60000
    share_heartbeat_interval_ms: int = 5000
    share_min_heartbeat_interval_ms: int = 5000
    share_max_heartbeat_interval_ms: int = 15000
    share_record_lock_duration_ms: int = 30000
    share_min_record_lock_duration_ms: int = 15000
    share_max_record_lock_duration_ms: int = 60000
    # group id -> its group configs (KIP-848, `group_configs`): a read-only view the server
    # keeps current from the cluster metadata, read at each heartbeat
    group_overrides: Mapping[str, Mapping[str, str]] = field(
        default_factory=dict, hash=False, compare=False
    )


@dataclass(slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinGroupResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: list[JoinedMember] = field(default_factory=list)


@dataclass(slots=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Completion:
    """The answer to an earlier PENDING request; `group_id` says whose state it reports, so a
    failed write of that group's records can turn it into an error (see `revert`)."""

    request_id: int
    response: JoinGroupResult | SyncGroupResult
    group_id: str = ""


@dataclass(slots=True)
class Result(Generic[T]):
    response: T | Pending
    records: list[GroupRecord] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)


@dataclass(slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: list[LeaveMemberResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(slots=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class OffsetFetchResult:
    error: ErrorCode
    partitions: list[FetchedOffset] = field(default_factory=list)


@dataclass(slots=True)
class OffsetDeleteResult:
    error: ErrorCode
    partitions: list[tuple[TopicPartition, ErrorCode]] = field(default_factory=list)


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    members: list[DescribedMember] = field(default_factory=list)


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
