"""One local replica's role as of the latest metadata image: leader or follower, its epochs and
ISR, and the events acks=all and DeleteRecords wait on.

Why in the broker layer: the partition facade reads it on every Produce and Fetch (leader epoch,
leader state, follower log starts), while `kafkapy.server.cluster.partition_roles.ReplicaManager`
keeps the roles current from the image and the followers' fetches.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kafkapy.broker.runtime import Event, new_event
from kafkapy.replication.partition import LeaderState

__all__ = ["PartitionRole"]


@dataclass(slots=True)
class PartitionRole:
    """One local replica's role as of the latest image."""

    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_state: LeaderState | None = None  # set while this node leads
    alter_in_flight: bool = False
    alter_retry_at: float = 0.0  # runtime time: no new AlterPartition before (after a failure)
    # set (and replaced) at every role change, and by every HW move for `wait_replicated`
    # callers that do not wait on their own event
    changed: Event = field(default_factory=new_event)
    # acks=all waiters: heap of (end offset, seq, event); a HW move wakes only those it reached
    hw_waiters: list[tuple[int, int, Event]] = field(default_factory=list)
    # each follower's log start as its fetches report it (DeleteRecords waits for them)
    follower_log_starts: dict[int, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None
