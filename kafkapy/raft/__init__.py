"""KRaft-style Raft for the metadata log: a sans-IO core (no trio, no sockets, time passed in).

Public facade: the server imports only from here. `RaftCore` is the state machine,
`RaftLog` what it needs from a log (`MemoryRaftLog` for simulations), `QuorumState` what must
be persisted, and the messages mirror Kafka's Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch /
FetchSnapshot.
"""

from kafkapy.raft.core import NotLeaderError, RaftCore, Ready
from kafkapy.raft.log import Entry, MemoryRaftLog, RaftLog, SnapshotId
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.state import QuorumState, ReplicaProgress, Role

__all__ = [
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Entry",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "MemoryRaftLog",
    "NotLeaderError",
    "QuorumState",
    "RaftCore",
    "RaftLog",
    "RaftRequest",
    "RaftResponse",
    "Ready",
    "ReplicaProgress",
    "Role",
    "SnapshotId",
    "VoteRequest",
    "VoteResponse",
]
