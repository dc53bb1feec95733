"""The bookkeeping of a metadata delta applied in slices (`DeltaSlices`) and the summary of
the role changes it made (`RoleChanges`), for `partition_roles.ReplicaManager`.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field

import trio

__all__ = ["DeltaSlices", "Key", "RoleChanges"]

Key = tuple[str, int]


@dataclass(slots=True)
class RoleChanges:
    """The role changes one image made, for its one summary line."""

    leaders: int = 0
    followers: dict[int, int] = field(default_factory=dict)  # leader id -> partitions

    def __bool__(self) -> bool:
        return bool(self.leaders or self.followers)

    def summary(self) -> str:
        follows = ", ".join(f"{n} of {leader}" for leader, n in sorted(self.followers.items()))
        total = sum(self.followers.values())
        return f"leader of {self.leaders} partitions, follower of {total}" + (f" ({follows})" if follows else "")


@dataclass(slots=True)
class DeltaSlices:
    """The partition work a metadata delta queued: each partition brought to the latest image
    (`pending`, value: its topic's configs changed) and removed topics' logs to delete
    (`deletes`, value: the removed topic's id), applied `partitions` at a time or for at most
    `budget_s` per slice, with a checkpoint between slices.

    Why slices: creating a log is a directory and a few files, a role change a few objects and
    listeners; a CreateTopics of thousands of partitions applied in one go (inside Raft's
    commit callback) stopped the event loop for seconds, so heartbeats were late and the
    controller's own Raft stalled. A slice is bounded in partitions and in time, and the
    partitions waiting meanwhile answer as loading (`kafkapy.broker.log_state`).
    """

    pending: dict[Key, bool] = field(default_factory=dict)
    deletes: dict[Key, uuid.UUID] = field(default_factory=dict)
    #: queued partitions whose log is open here (a role or ISR change): applied before the
    #: log creations in `pending`, so a failover does not wait behind a large CreateTopics
    changes: dict[Key, bool] = field(default_factory=dict)
    #: queued partitions of internal topics, applied at once (`ReplicaManager._apply_internal`)
    internal: list[Key] = field(default_factory=list)
    partitions: int = 256
    budget_s: float = 0.02
    wakeup: trio.Event = field(default_factory=trio.Event)
    #: a whole image is being applied: its summary line is owed when the queue empties
    whole_image: bool = False
    #: slices applied so far (a figure for tests and the bench: a large delta takes several)
    slices: int = 0

    def __bool__(self) -> bool:
        """Work is left."""
        return bool(self.deletes or self.changes or self.pending)

    def unbounded_time(self) -> None:
        """Slices bounded by `partitions` alone (tests: the same slices on any machine)."""
        self.budget_s = math.inf
