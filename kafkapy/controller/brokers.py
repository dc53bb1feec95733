"""Broker lifecycle decisions (Kafka's ClusterControlManager + BrokerHeartbeatManager).

States of a registered broker and what moves it:
- FENCED (after registration): a heartbeat whose metadata offset reached the broker epoch
  (the offset of its own RegisterBrokerRecord) and that does not want fencing or shutdown
  unfences it; leaderless partitions it can lead get a leader.
- ACTIVE (unfenced): session expiry (no heartbeat for `session_timeout_ms`), `want_fence`, a
  re-registration by a new incarnation or `fence_gone` (the server saw every listener of the
  broker refuse connections: its process is gone) fences it: it leaves every ISR it is in (unless it is
  the last member) and its leaderships move to the next ISR member.
- CONTROLLED SHUTDOWN (`want_shutdown` from an active broker): it leaves every ISR and
  leadership at once; it is told to shut down once it has applied those changes, and is then
  fenced. A fenced broker that wants to shut down may do so at once.
Departures are bounded: a fence or a controlled shutdown moves at most
`MAX_PARTITION_CHANGES_PER_OPERATION` partitions in its own operation, those the broker leads
first; the rest move in follow-up operations: `continue_departures`, which `tick` also runs
(the next deadline is due at once while `departing` brokers remain). A broker in controlled
shutdown is told to shut down only once all of its partitions have moved. A new controller
finds the departing brokers in its image (not active, yet leading or sharing an ISR).
A registration from a new incarnation while the old one is active with a live session is
refused (DUPLICATE_BROKER_REGISTRATION, Kafka's rule: two live processes must not share an id)
unless it names the old epoch as its previous one - proof that it is the same broker restarted
on the data dir the old process held (see `server/cluster/lifecycle.py`). A fenced old
incarnation has no session to protect (as Kafka's BrokerHeartbeatManager.hasValidSession) and
is replaced at once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

from kafkapy.controller.image import PartitionImage, TopicImage
from kafkapy.controller.records import (
    BrokerRegistrationChangeRecord,
    Endpoint,
    MetadataRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from kafkapy.controller.state import ControllerResult, ControllerState
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "HeartbeatReply",
    "ProducerIdsReply",
    "RegistrationReply",
    "allocate_producer_ids",
    "broker_heartbeat",
    "continue_departures",
    "extend_sessions",
    "fence_gone",
    "register_broker",
    "tick",
    "touch_session",
]

_MAX_PRODUCER_ID = (1 << 63) - 1
#: The most partition changes one operation emits for departing brokers (Kafka bounds a
#: controller operation's records the same way: QuorumController's MAX_RECORDS_PER_USER_OP,
#: and its Raft batches by `maxRecordsPerBatch`): one batch of thousands of records would hold
#: the controller, the metadata log and every broker's apply loop for its whole length.
MAX_PARTITION_CHANGES_PER_OPERATION = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class RegistrationReply:
    error: ErrorCode
    broker_epoch: int = -1
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatReply:
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerIdsReply:
    error: ErrorCode
    start: int = -1
    length: int = 0


def _session_live(st: ControllerState, broker_id: int, now_ms: int) -> bool:
    last = st.last_contact_ms.get(broker_id)
    return last is not None and now_ms - last <= st.config.session_timeout_ms


def register_broker(
    st: ControllerState,
    broker_id: int,
    *,
    cluster_id: str,
    incarnation_id: uuid.UUID,
    endpoints: Sequence[Endpoint],
    rack: str | None,
    now_ms: int,
    previous_broker_epoch: int = -1,
) -> ControllerResult[RegistrationReply]:
    """Register (or re-register) a broker; it starts fenced with a new broker epoch."""
    records: list[MetadataRecord] = []
    if st.config.cluster_id is not None and cluster_id != st.config.cluster_id:
        return ControllerResult(
            records,
            RegistrationReply(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                message=f"cluster id {cluster_id!r} is not {st.config.cluster_id!r}",
            ),
        )
    if broker_id < 0:
        return ControllerResult(
            records, RegistrationReply(ErrorCode.INVALID_REGISTRATION, message="negative id")
        )
    existing = st.image.brokers.get(broker_id)
    if (
        existing is not None
        and existing.incarnation_id != incarnation_id
        and previous_broker_epoch != existing.epoch
        and not existing.fenced
        and _session_live(st, broker_id, now_ms)
    ):
        return ControllerResult(
            records,
            RegistrationReply(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                message=f"another broker is registered with id {broker_id}",
            ),
        )
    was_active = existing is not None and not existing.fenced
    epoch = st.next_offset
    st.emit(
        records,
        RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True),
    )
    if was_active:
        _leave_isrs(st, records, broker_id)
    st.shutdown_offsets.pop(broker_id, None)
    st.last_contact_ms[broker_id] = now_ms
    return ControllerResult(records, RegistrationReply(ErrorCode.NONE, epoch))


def _leave_isrs(st: ControllerState, records: list[MetadataRecord], broker_id: int) -> None:
    """Take a no longer active broker out of every ISR and leadership it holds - in this
    operation as far as its bound allows, the rest in follow-up ones (`continue_departures`)."""
    st.departing[broker_id] = None
    continue_departures(st, records)


def continue_departures(st: ControllerState, records: list[MetadataRecord]) -> list[int]:
    """Move the partitions of departing brokers on, at most
    `MAX_PARTITION_CHANGES_PER_OPERATION` changes in the operation `records` belongs to (its
    changes so far count); returns the brokers still departing afterwards."""
    budget = MAX_PARTITION_CHANGES_PER_OPERATION - sum(
        isinstance(r, PartitionChangeRecord) for r in records
    )
    for broker_id in list(st.departing):
        if st.image.is_active(broker_id):
            del st.departing[broker_id]
            continue
        emitted, done = _move_partitions(st, records, broker_id, budget)
        budget -= emitted
        if not done:
            break
        del st.departing[broker_id]
        if broker_id in st.shutdown_offsets:
            st.shutdown_offsets[broker_id] = st.next_offset - 1
    return list(st.departing)


def _move_partitions(
    st: ControllerState, records: list[MetadataRecord], broker_id: int, budget: int
) -> tuple[int, bool]:
    """Up to `budget` changes taking `broker_id` out of ISRs and leaderships, the partitions
    it leads first (they are unavailable until moved); (changes emitted, all done)."""
    led: list[tuple[TopicImage, int, PartitionImage]] = []
    followed: list[tuple[TopicImage, int, PartitionImage]] = []
    for topic, pid, part in st.partitions_with(broker_id):
        if part.leader == broker_id:
            led.append((topic, pid, part))
        elif broker_id in part.isr:
            followed.append((topic, pid, part))
    emitted = 0
    for topic, pid, part in led + followed:
        if emitted >= budget:
            return emitted, False
        isr = tuple(r for r in part.isr if r != broker_id)
        emitted += st.elect(records, topic, pid, isr=isr)
    return emitted, True


def _elect_leaderless(st: ControllerState, records: list[MetadataRecord], broker_id: int) -> None:
    """After `broker_id` became active: give its leaderless partitions a leader if allowed."""
    for topic, pid, part in st.partitions_with(broker_id):
        if part.leader == -1:
            st.elect(records, topic, pid)


def fence(st: ControllerState, records: list[MetadataRecord], broker_id: int) -> None:
    """Fence an active broker (clearing controlled shutdown) and move its partitions away."""
    b = st.image.brokers[broker_id]
    shutdown = False if b.in_controlled_shutdown else None
    st.emit(
        records,
        BrokerRegistrationChangeRecord(
            broker_id, b.epoch, fenced=True, in_controlled_shutdown=shutdown
        ),
    )
    _leave_isrs(st, records, broker_id)
    st.last_contact_ms.pop(broker_id, None)
    st.shutdown_offsets.pop(broker_id, None)


def broker_heartbeat(
    st: ControllerState,
    broker_id: int,
    broker_epoch: int,
    *,
    current_metadata_offset: int,
    want_fence: bool,
    want_shutdown: bool,
    now_ms: int,
) -> ControllerResult[HeartbeatReply]:
    """Touch the session and move the broker between fenced / active / shutting down."""
    records: list[MetadataRecord] = []
    b = st.image.brokers.get(broker_id)
    if b is None:
        return ControllerResult(records, HeartbeatReply(ErrorCode.BROKER_ID_NOT_REGISTERED))
    if b.epoch != broker_epoch:
        return ControllerResult(records, HeartbeatReply(ErrorCode.STALE_BROKER_EPOCH))
    caught_up = current_metadata_offset >= b.epoch
    if b.fenced:
        if want_shutdown:
            st.last_contact_ms.pop(broker_id, None)
            return ControllerResult(
                records, HeartbeatReply(ErrorCode.NONE, caught_up, True, should_shut_down=True)
            )
        st.last_contact_ms[broker_id] = now_ms
        if want_fence or not caught_up:
            return ControllerResult(records, HeartbeatReply(ErrorCode.NONE, caught_up, True))
        st.emit(records, UnfenceBrokerRecord(broker_id, b.epoch))
        st.departing.pop(broker_id, None)
        _elect_leaderless(st, records, broker_id)
        return ControllerResult(records, HeartbeatReply(ErrorCode.NONE, True, False))
    st.last_contact_ms[broker_id] = max(st.last_contact_ms.get(broker_id, now_ms), now_ms)
    if want_fence:
        fence(st, records, broker_id)
        return ControllerResult(records, HeartbeatReply(ErrorCode.NONE, caught_up, True))
    if want_shutdown or b.in_controlled_shutdown:
        if not b.in_controlled_shutdown:
            st.emit(
                records,
                BrokerRegistrationChangeRecord(broker_id, b.epoch, in_controlled_shutdown=True),
            )
            _leave_isrs(st, records, broker_id)
            st.shutdown_offsets[broker_id] = st.next_offset - 1
            return ControllerResult(records, HeartbeatReply(ErrorCode.NONE, caught_up, False))
        target = st.shutdown_offsets.get(broker_id, st.image.offset)
        moved = broker_id not in st.departing
        if want_shutdown and moved and current_metadata_offset >= target:
            fence(st, records, broker_id)
            return ControllerResult(
                records, HeartbeatReply(ErrorCode.NONE, caught_up, True, should_shut_down=True)
            )
    return ControllerResult(records, HeartbeatReply(ErrorCode.NONE, caught_up, False))


def touch_session(st: ControllerState, broker_id: int, broker_epoch: int, now_ms: int) -> None:
    """Count a heartbeat of the current registration of an active broker the moment it
    reaches the controller (it may then queue behind slower operations before it is decided:
    its lateness must not fence a live broker)."""
    b = st.image.brokers.get(broker_id)
    if b is None or b.fenced or b.epoch != broker_epoch:
        return
    st.last_contact_ms[broker_id] = max(st.last_contact_ms.get(broker_id, now_ms), now_ms)


def extend_sessions(st: ControllerState, stalled_ms: int) -> None:
    """The controller itself could not run for `stalled_ms` (its process was paused or
    starved): heartbeats sent meanwhile could not be counted, so the time does not count
    against the brokers' sessions."""
    for broker_id in st.last_contact_ms:
        st.last_contact_ms[broker_id] += max(0, stalled_ms)


def fence_gone(st: ControllerState, broker_id: int, broker_epoch: int) -> ControllerResult[bool]:
    """Fence the active registration `broker_id`/`broker_epoch` before its session expires: the
    server has positive evidence its process is gone (every listener refuses connections).
    False (nothing emitted) when that registration is no longer the active one."""
    records: list[MetadataRecord] = []
    b = st.image.brokers.get(broker_id)
    if b is None or b.fenced or b.epoch != broker_epoch:
        return ControllerResult(records, False)
    fence(st, records, broker_id)
    return ControllerResult(records, True)


def tick(st: ControllerState, now_ms: int) -> ControllerResult[list[int]]:
    """Fence every active broker whose session expired, and continue departures (within the
    operation's bound); returns the ids fenced."""
    records: list[MetadataRecord] = []
    expired = [
        b.id
        for b in st.image.brokers.values()
        if not b.fenced and not _session_live(st, b.id, now_ms)
    ]
    for broker_id in sorted(expired):
        fence(st, records, broker_id)
    continue_departures(st, records)
    return ControllerResult(records, expired)


def next_session_deadline_ms(st: ControllerState) -> int | None:
    """When the next active broker's session expires (None: no active broker); at once (0)
    while departing brokers have partitions left to move, so a driver that ticks when this
    passes continues the departures one bounded operation at a time."""
    if st.departing:
        return 0
    deadlines = [
        st.last_contact_ms.get(b.id, 0) + st.config.session_timeout_ms + 1
        for b in st.image.brokers.values()
        if not b.fenced
    ]
    return min(deadlines) if deadlines else None


def allocate_producer_ids(
    st: ControllerState, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsReply]:
    """Hand out the next block of `producer_id_block_size` ids (KIP-730)."""
    records: list[MetadataRecord] = []
    b = st.image.brokers.get(broker_id)
    if b is None:
        return ControllerResult(records, ProducerIdsReply(ErrorCode.BROKER_ID_NOT_REGISTERED))
    if b.epoch != broker_epoch:
        return ControllerResult(records, ProducerIdsReply(ErrorCode.STALE_BROKER_EPOCH))
    start = st.image.next_producer_id
    length = st.config.producer_id_block_size
    if start > _MAX_PRODUCER_ID - length:
        return ControllerResult(records, ProducerIdsReply(ErrorCode.UNKNOWN_SERVER_ERROR))
    st.emit(records, ProducerIdsRecord(broker_id, broker_epoch, start + length))
    return ControllerResult(records, ProducerIdsReply(ErrorCode.NONE, start, length))
