"""Each local partition's log state: READY, LOADING or OFFLINE - one map, read by every path
that serves a partition.

Why one place: a partition whose log failed (at start, while a metadata delta created or
deleted it, on a full disk) must answer the same everywhere - Produce, Fetch, ListOffsets,
Metadata's `offline_replicas`, the metrics and `/readyz` - and a partition whose log is still
being created or deleted must too. Flags kept beside the roles, the logs and the coordinators
would drift apart.

- READY: the log is open (or no replica here); the partition's role decides the answers.
- LOADING: its log is being created or deleted (off the event loop, in slices): data requests
  answer NOT_LEADER_OR_FOLLOWER (the client retries), the group and transaction coordinators
  whose `__consumer_offsets` / `__transaction_state` partition it is answer
  COORDINATOR_LOAD_IN_PROGRESS, and the node is not ready (`/readyz`) until none is.
- OFFLINE: its log failed (`reason`: the storage error): data requests answer
  KAFKA_STORAGE_ERROR (Kafka's answer for a replica in an offline log dir), Metadata lists this
  node among the partition's offline replicas, and the node is ready regardless - an offline
  partition is counted and reported, never waited for. Logged at ERROR once, when it goes
  offline (the log store logged the cause with its traceback already).

Only the non-ready partitions are kept, so the map costs nothing for a healthy node. State
machine code: no trio, no I/O.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from collections.abc import Iterator

__all__ = ["LogState", "PartitionLogStates"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


class LogState(enum.Enum):
    READY = "ready"
    LOADING = "loading"
    OFFLINE = "offline"


class PartitionLogStates:
    """The broker's map of partitions whose log is not READY (see the module doc)."""

    def __init__(self) -> None:
        self._states: dict[Key, tuple[LogState, str]] = {}
        # offline partitions whose log a deletion left on disk: deleted again before a topic
        # of the same name is created there (the data belongs to no topic any more)
        self._undeleted: set[Key] = set()
        # LOADING entries: `loading_count` is read by /readyz, the metrics and the bench polls,
        # which must not walk thousands of loading partitions each time
        self._loading = 0

    def state(self, topic: str, partition: int) -> LogState:
        entry = self._states.get((topic, partition))
        return LogState.READY if entry is None else entry[0]

    def reason(self, topic: str, partition: int) -> str:
        """Why the partition is offline ("" when it is not)."""
        entry = self._states.get((topic, partition))
        return entry[1] if entry is not None and entry[0] is LogState.OFFLINE else ""

    def set_offline(self, topic: str, partition: int, reason: str, *, undeleted: bool = False) -> bool:
        """Take the partition offline; True (and one ERROR line) when it was not already.
        `undeleted`: its log failed to be deleted (see `undeleted`)."""
        key = (topic, partition)
        if undeleted:
            self._undeleted.add(key)
        entry = self._states.get(key)
        if entry is not None and entry[0] is LogState.OFFLINE:
            return False
        reason = reason or "unknown storage error"
        self._loading -= entry is not None
        self._states[key] = (LogState.OFFLINE, reason)
        log.error("%s-%d is offline: %s", topic, partition, reason)
        return True

    def set_loading(self, topic: str, partition: int) -> None:
        """The partition's log is being created or deleted (an offline one stays offline)."""
        key = (topic, partition)
        entry = self._states.get(key)
        if entry is None:
            self._loading += 1
            self._states[key] = (LogState.LOADING, "")

    def set_ready(self, topic: str, partition: int) -> None:
        """Its log opened, or it has none here any more (deleted, moved away)."""
        self._undeleted.discard((topic, partition))
        entry = self._states.pop((topic, partition), None)
        self._loading -= entry is not None and entry[0] is LogState.LOADING
        if entry is not None and entry[0] is LogState.OFFLINE:
            log.info("%s-%d is ready", topic, partition)

    def undeleted(self, topic: str, partition: int) -> bool:
        """The partition's log was to be deleted and is still on disk."""
        return (topic, partition) in self._undeleted

    def offline(self) -> dict[Key, str]:
        """Offline partitions and why."""
        return {k: reason for k, (state, reason) in self._states.items() if state is LogState.OFFLINE}

    def loading_count(self) -> int:
        return self._loading

    def counts(self) -> Counter[LogState]:
        """Partitions per non-ready state (READY is every other local partition)."""
        return Counter(state for state, _ in self._states.values())

    def __len__(self) -> int:
        """Partitions not READY: 0 (falsy) on a healthy node, so the hot path skips the map."""
        return len(self._states)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._states)
