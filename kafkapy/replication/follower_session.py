"""A follower's side of an incremental fetch session (KIP-227) with one leader, as plain state.

Why: a follower of thousands of partitions led by one broker would otherwise send every one of
them in every Fetch (one per `replica.fetch.wait.max.ms` when idle), and the leader would parse,
check and answer each; with a session the leader remembers the partition set, a request carries
only the partitions whose fetch offset moved, and the answer only partitions with news.

Rules (Kafka's FetchSessionHandler, as a follower uses it):
- Without a session (`epoch` 0) a request is full: session epoch 0 (INITIAL), every partition,
  and the old session id if there was one (the leader closes it). An answer naming a session id
  opens the session: the next request is incremental at epoch 1, and each answered incremental
  request advances the epoch by one (2**31 - 1 wraps to 1). An answer with session id 0 (the
  leader's cache had no slot) leaves the follower on full requests.
- An incremental request carries each partition whose fetch offset moved since the leader last
  heard of it and forgets (`forgotten_topics_data`) the partitions no longer fetched. A partition
  new to the session, or whose topic id, leader epoch or log start offset changed, makes the
  request full instead: the leader's session keeps a fetch offset per partition only, so what a
  leader checks of the rest (the leader epoch fence, KIP-279's diverging epoch against
  `last_fetched_epoch`, a follower's log start that DeleteRecords waits for) comes with a full
  request.
- `reset()`: after any request that failed or was refused (FETCH_SESSION_ID_NOT_FOUND after an
  eviction or a leader restart, INVALID_FETCH_SESSION_EPOCH, a lost connection: the leader may
  or may not have advanced the epoch) and after a truncation (the diverging epoch is checked
  again); the next request is full.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FollowerSession", "SessionRequest", "WantedPartition"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
SessionKey = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class WantedPartition:
    """One partition as the follower would fetch it now."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int

    @property
    def key(self) -> SessionKey:
        return (self.topic_id, self.partition)

    def same_but_offset(self, other: WantedPartition) -> bool:
        """Only the fetch offset differs (or nothing): an incremental request can carry it."""
        return (
            self.topic == other.topic
            and self.leader_epoch == other.leader_epoch
            and self.log_start_offset == other.log_start_offset
        )


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What one Fetch carries: `send` in its topics, `forgotten` in forgotten_topics_data;
    `held` is the leader's session once it answers (what its answer may name)."""

    session_id: int
    epoch: int
    send: list[WantedPartition]
    forgotten: list[SessionKey]
    held: dict[SessionKey, WantedPartition]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FollowerSession:
    """See the module doc. One per leader a follower fetches from."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._held: dict[SessionKey, WantedPartition] = {}
        self.full_requests = 0  # introspection for tests and logs
        self.resets = 0

    def build(self, wanted: list[WantedPartition]) -> SessionRequest:
        """The next request for `wanted` (the partitions to fetch now)."""
        held = {w.key: w for w in wanted}
        if self.epoch != INITIAL_EPOCH:
            old = self._held
            if all((prev := old.get(k)) is not None and prev.same_but_offset(w) for k, w in held.items()):
                send = [w for k, w in held.items() if old[k].fetch_offset != w.fetch_offset]
                forgotten = [k for k in old if k not in held]
                return SessionRequest(self.session_id, self.epoch, send, forgotten, held)
        return SessionRequest(self.session_id, INITIAL_EPOCH, list(held.values()), [], held)

    def answered(self, request: SessionRequest, session_id: int) -> None:
        """The leader answered `request` without a top-level error, naming `session_id`."""
        self._held = request.held
        if request.full:
            self.full_requests += 1
            self.session_id = session_id
            self.epoch = 1 if session_id != 0 else INITIAL_EPOCH
        else:
            self.epoch = self.epoch + 1 if self.epoch < MAX_EPOCH else 1

    def reset(self) -> None:
        """Start over with a full request (the old session id goes with it, to be closed)."""
        if self.epoch != INITIAL_EPOCH:
            self.resets += 1
        self.epoch = INITIAL_EPOCH
        self._held = {}
