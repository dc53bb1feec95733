"""Incremental fetch sessions (KIP-227), as plain state: no trio, time passed in.

Why sessions: a consumer fetching hundreds of partitions would otherwise resend all of them every
few hundred milliseconds. With a session the broker remembers the partition set and each fetch
carries only changes, and the response carries only partitions with something new (records, or a
changed high watermark / log start offset / last stable offset, an error, or a leader naming
a preferred read replica).

Rules:
- epoch -1 (FINAL): sessionless full fetch; closes `session_id` if it is open.
- epoch 0 (INITIAL): full fetch; closes `session_id` if non-zero and opens a new session when a
  slot is free (otherwise answers with session id 0, and the client keeps doing full fetches).
- epoch > 0: incremental; unknown id -> FETCH_SESSION_ID_NOT_FOUND, wrong epoch ->
  INVALID_FETCH_SESSION_EPOCH; the session's epoch advances by one per successful fetch.
- The cache holds at most `max_slots` consumer sessions; when full, the least recently used
  consumer session that has been idle for `evict_idle_ms` makes room (Kafka's rule,
  simplified); its client gets FETCH_SESSION_ID_NOT_FOUND on the next incremental fetch and
  starts a new session.
- A follower's session (`privileged`: the fetch came from a replica, as Kafka privileges them)
  is never refused and never evicted for a consumer's: it takes the least recently used
  consumer session's slot at once, idle or not, and with none to take the cache holds it
  beyond `max_slots` (there are at most as many as brokers). Replication of thousands of
  partitions must not fall back to full fetches because consumers filled the cache.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["FetchSession", "FetchSessionCache", "PartitionKey", "SessionPartition", "TopicRef"]

# A topic is named by its name (Fetch < v13) or by its id (v13+).
TopicRef = str | uuid.UUID
PartitionKey = tuple[TopicRef, int]


@dataclass(slots=True)
class SessionPartition:
    fetch_offset: int
    partition_max_bytes: int
    # What the client was last told; an incremental response includes the partition on change.
    sent_high_watermark: int = -2
    sent_log_start_offset: int = -2
    sent_last_stable_offset: int = -2

    def changed(self, high_watermark: int, log_start_offset: int, last_stable_offset: int) -> bool:
        return (
            high_watermark != self.sent_high_watermark
            or log_start_offset != self.sent_log_start_offset
            or last_stable_offset != self.sent_last_stable_offset
        )

    def mark_sent(self, high_watermark: int, log_start_offset: int, last_stable_offset: int) -> None:
        self.sent_high_watermark = high_watermark
        self.sent_log_start_offset = log_start_offset
        self.sent_last_stable_offset = last_stable_offset


@dataclass(slots=True)
class FetchSession:
    session_id: int
    epoch: int  # the epoch the next incremental fetch must carry
    partitions: dict[PartitionKey, SessionPartition]
    last_used_ms: int
    privileged: bool = False  # a follower's (see the module doc)

    def update(
        self,
        changes: list[tuple[PartitionKey, int, int]],
        forgotten: list[PartitionKey],
    ) -> None:
        """Apply an incremental request: (key, fetch_offset, max_bytes) upserts, then removals."""
        for key, offset, max_bytes in changes:
            part = self.partitions.get(key)
            if part is None:
                self.partitions[key] = SessionPartition(offset, max_bytes)
            else:
                part.fetch_offset = offset
                part.partition_max_bytes = max_bytes
        for key in forgotten:
            self.partitions.pop(key, None)


class FetchSessionCache:
    def __init__(self, max_slots: int, *, evict_idle_ms: int = 120_000, seed: int | None = None) -> None:
        self.max_slots = max_slots
        self.evict_idle_ms = evict_idle_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU first
        self._rng = random.Random(seed)
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        """Partitions held by all sessions (a metric; computed when asked)."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int, now_ms: int) -> FetchSession | None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.last_used_ms = now_ms
            self._sessions.move_to_end(session_id)
        return session

    def remove(self, session_id: int) -> FetchSession | None:
        return self._sessions.pop(session_id, None)

    def create(
        self, partitions: dict[PartitionKey, SessionPartition], now_ms: int, *, privileged: bool = False
    ) -> FetchSession | None:
        """Open a session (epoch 1 next) or return None when no slot can be freed (never for
        a `privileged` one, see the module doc)."""
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._make_room(now_ms, privileged):
            return None
        while True:
            session_id = self._rng.randint(1, 2**31 - 1)
            if session_id not in self._sessions:
                break
        session = FetchSession(session_id, 1, partitions, now_ms, privileged)
        self._sessions[session_id] = session
        return session

    def _make_room(self, now_ms: int, privileged: bool) -> bool:
        """Evict the least recently used consumer session if the newcomer may take its slot."""
        for session_id, session in self._sessions.items():  # least recently used first
            if session.privileged:
                continue
            if not privileged and now_ms - session.last_used_ms < self.evict_idle_ms:
                return False
            del self._sessions[session_id]
            self.evictions += 1
            return True
        return privileged
