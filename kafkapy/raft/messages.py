"""Raft messages, one frozen dataclass per Kafka wire message, so the server maps them 1:1.

The fields are the per-partition fields of Kafka's Vote / BeginQuorumEpoch / EndQuorumEpoch /
Fetch / FetchSnapshot for the single metadata partition; the cluster id, topic name and partition index are the
server's business. `leader_id` is None where the wire says -1 (no known leader).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.log import Entry, SnapshotId

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "RaftRequest",
    "RaftResponse",
    "VoteRequest",
    "VoteResponse",
]


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """A candidate asks for a vote in `candidate_epoch`; its log ends at (epoch, offset).
    `pre_vote` (KIP-996): only asks whether the vote would be granted - the receiver changes
    nothing (no epoch bump, no vote recorded)."""

    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    """A new leader announces itself, so voters need not wait for a fetch timeout."""

    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """A leader resigns; `preferred_successors` (most caught up first) elect without waiting."""

    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    leader_id: int | None
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's or observer's pull: its log ends at `fetch_offset` after an entry of
    `last_fetched_epoch`. `current_leader_epoch` is the epoch the fetcher believes in (Kafka's
    CurrentLeaderEpoch; -1 = unknown, not checked), so a leader can fence stale fetchers."""

    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int = -1
    #: the `leader_clock_ms` of the last answer the fetcher accepted from the leader it asks
    #: (-1: none yet) - proof for that leader that this voter heard from it since then
    leader_clock_ms: int = -1


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries from the fetch offset, or `diverging_epoch` = (epoch, end offset) telling the
    fetcher to truncate to at most `end offset` and fetch again, or `snapshot_id` telling it
    that its fetch offset is below the leader's log start: fetch that snapshot instead."""

    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    high_watermark: int
    diverging_epoch: tuple[int, int] | None = None
    entries: list[Entry] = field(default_factory=list)
    snapshot_id: SnapshotId | None = None
    #: the leader's clock when it answered (-1: not a leader's answer); echoed in the next fetch
    leader_clock_ms: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """A fetcher asks for the bytes of `snapshot_id` from `position` (KIP-630)."""

    replica_id: int
    snapshot_id: SnapshotId
    position: int
    current_leader_epoch: int = -1
    max_bytes: int = 0x7FFFFFFF
    #: as in `FetchRequest`
    leader_clock_ms: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """`data` is the part of the snapshot from `position`; `size` its total size."""

    error: ErrorCode
    leader_id: int | None
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int = 0
    position: int = 0
    data: bytes = b""
    #: as in `FetchResponse`
    leader_clock_ms: int = -1


RaftRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
