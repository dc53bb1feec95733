"""Fetch (key 1): v4-17 (magic v2 batches; topic ids from v13).

Behaviour: for each partition, whole batches from the fetch offset (an offset inside a batch
returns that whole batch; clients skip the records before their offset) up to the partition's
max bytes and the response's max bytes; the first non-empty partition always gets at least one
batch (KIP-74). Consumers (read_uncommitted) see data below the high watermark, read_committed
below the last stable offset. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION,
UNKNOWN_TOPIC_ID (v13+), OFFSET_OUT_OF_RANGE (with the log start offset so the client can
reset).

Long poll: when less than min_bytes is available and there is no error, the request releases
its connection turn and waits - woken by an append to any fetched partition (no polling) - until
min_bytes arrive or max_wait_ms passes. Fetch sessions (KIP-227) per `fetch_session.py`.

The response is built by `protocol.fetch_response` around file regions, so the connection can `sendfile`
the record data straight from segment files.

read_committed fetches carry the aborted transactions overlapping the returned range (from the
log's transaction index) so the client can drop their records; they load the partition's
producer state first, since that is what sets its last stable offset. Control batches (markers)
are returned like any batch, as Kafka does; clients skip them.

Inside a session, partitions that returned data move to the back of the order, so one busy
partition cannot starve the others of the response budget.

Leadership (`kafkapy.broker.partitions`, as for every partition API): only the partition's
leader answers (else NOT_LEADER_OR_FOLLOWER); a current_leader_epoch (v9+) behind / ahead of the
leader's -> FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (one node leads in epoch 0). A follower's
fetch (replica_id >= 0, or ReplicaState from v15) reads up to the log end instead of the HW,
reports the follower's progress to the partition's LeaderState (which may move the HW, waking
acks=all producers and long polls) and, from v12, gets `diverging_epoch` instead of data when
its last fetched epoch ends earlier on the leader than its fetch offset (KIP-279), so it
truncates first.

Authorization (an authorizer configured): a follower needs CLUSTER_ACTION on the cluster, a
consumer READ on each topic; a partition refused is answered TOPIC_AUTHORIZATION_FAILED and does
not cut the long poll short (Kafka's `handleFetchRequest`).

Quotas (`consumer_byte_rate`, kafkapy.quota; consumers only, never followers): a client already
over its quota gets an empty response at once (no data read) with `throttle_time_ms`; otherwise
the bytes it is sent count against the quota, and if they take it over the response says for how
long. Either way the connection reads nothing more from the client for that time (KIP-219).
Kafka reads the data first and drops it when it would go over; checking first reads nothing in
vain and keeps the client at the same rate.

Follower fetching (KIP-392, docs/scaling-levers.md): a consumer's Fetch v11+ may be served
by any replica (a follower reads up to its own high watermark / last stable offset; above its
high watermark OFFSET_NOT_AVAILABLE, outside its log OFFSET_OUT_OF_RANGE); with
`replica.selector.class` set to Kafka's RackAwareReplicaSelector and the client's `rack_id`,
the leader answers a partition with `preferred_read_replica` (an in-sync follower in the
client's rack, broker/replica_selector.py) and no data, at once.

Tiered topics (KIP-405, `kafkapy.broker.remote_fetch`): an offset below the local log start
but in the remote tier is read from there for a consumer - one such partition per request, on
a worker thread within `remote.fetch.max.wait.ms`, the connection's later requests going on
meanwhile - and answers OFFSET_MOVED_TO_TIERED_STORAGE to a follower; the log start offset a
tiered partition answers with is the remote tier's.

Not yet: Fetch v0-3 (magic v0/v1 message sets).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker import runtime
from kafkapy.broker.clock import quota_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.fetch_session import (
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    SessionPartition,
    TopicRef,
)
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.partitions import LeaderPartition
from kafkapy.broker.remote_fetch import RemoteFetch, RemoteTier, is_tiered, remote_read_failure
from kafkapy.broker.replica_selector import selector_enabled
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.fetch_response import PartitionPart, TopicPart, encode_fetch_response
from kafkapy.protocol.messages import FetchRequest
from kafkapy.protocol.raw_response import SENDFILE_MIN_BYTES, FileRegion, RawResponse
from kafkapy.quota.client_quotas import CONSUMER_BYTE_RATE
from kafkapy.storage.errors import OffsetOutOfRangeError, StorageError
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.results import FileSlice

__all__ = ["handle_fetch"]

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
READ_COMMITTED = 1
_ZERO = uuid.UUID(int=0)
_NONE = ErrorCode.NONE  # per partition: a module global reads faster than the enum's attribute


@dataclass(slots=True)
class _Wanted:
    ref: TopicRef
    partition: int
    fetch_offset: int
    max_bytes: int
    state: SessionPartition | None = None  # set when part of a session
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    follower_reported: bool = False
    log_start_offset: int = -1  # a follower's own log start (DeleteRecords waits for it)
    read_from_follower: bool = False  # a consumer read this broker's follower replica (KIP-392)


def _requested(req: FetchRequest, by_id: bool) -> list[_Wanted]:
    wanted: list[_Wanted] = []
    for topic in req.topics:
        ref: TopicRef = topic.topic_id if by_id else topic.topic
        for p in topic.partitions:
            wanted.append(_Wanted(ref, p.partition, p.fetch_offset, p.partition_max_bytes,
                                  current_leader_epoch=p.current_leader_epoch,
                                  last_fetched_epoch=p.last_fetched_epoch,
                                  log_start_offset=p.log_start_offset))
    return wanted


def fetch_error_response(req: FetchRequest, version: int, code: ErrorCode) -> RawResponse:
    return encode_fetch_response(version, [], error_code=code if version >= 7 else 0)


def _replica_id(req: FetchRequest, version: int) -> int:
    """The fetching follower's id (-1: a consumer)."""
    return req.replica_state.replica_id if version >= 15 else req.replica_id


def _authorize(ctx: RequestContext, req: FetchRequest, wanted: list[_Wanted]) -> tuple[list[_Wanted], list[_Wanted]]:
    """(what the principal may read, what it may not): a follower needs CLUSTER_ACTION on the
    cluster for all of it, a consumer READ on each topic. A topic id this node does not know
    stays readable: the read answers UNKNOWN_TOPIC_ID, as Kafka does before authorizing."""
    if _replica_id(req, ctx.api_version) >= 0:
        if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            return wanted, []
        return [], wanted
    topics = ctx.topics
    names: dict[int, str] = {}
    for i, w in enumerate(wanted):
        if isinstance(w.ref, uuid.UUID):
            info = topics.by_id(w.ref)
            if info is not None:
                names[i] = info.name
        else:
            names[i] = w.ref
    denied = ctx.unauthorized(AclOperation.READ, ResourceType.TOPIC, names.values())
    if not denied:
        return wanted, []
    allowed: list[_Wanted] = []
    refused: list[_Wanted] = []
    for i, w in enumerate(wanted):
        (refused if names.get(i) in denied else allowed).append(w)
    return allowed, refused


class _Reader:
    """Reads every wanted partition once; `read()` may be repeated after a wake-up."""

    def __init__(
        self, ports: RequestPorts, req: FetchRequest, version: int, wanted: list[_Wanted],
        refused: list[_Wanted] | None = None, listener: str = "",
    ) -> None:
        self.topics = ports.topics
        self.partitions = ports.partitions
        self.version = version
        self.by_id = version >= 13
        self.read_committed = version >= 4 and req.isolation_level == READ_COMMITTED
        self.max_bytes = req.max_bytes if req.max_bytes > 0 else 0
        self.wanted = wanted
        #: partitions the principal may not read: answered TOPIC_AUTHORIZATION_FAILED
        self.refused = refused
        self.replica_id = _replica_id(req, version)
        #: KIP-392: a consumer's Fetch v11+ may read a follower; with the rack-aware selector
        #: the leader names a replica in the consumer's rack instead of answering with data
        self.follower_reads = version >= 11 and self.replica_id < 0
        selecting = self.follower_reads and bool(req.rack_id)
        self.client_rack = req.rack_id if selecting and selector_enabled(
            ports.config.get("replica.selector.class")) else ""
        self.listener = listener
        #: None: the broker has no remote tier (`remote.log.storage.system.enable=false`)
        self.remote: RemoteTier | None = ports.remote_tier
        #: the partition this request reads from the remote tier (at most one), set by `read`
        self.remote_pending: tuple[PartitionPart, RemoteFetch, LeaderPartition] | None = None

    def _tiered(self, name: str, partition: int) -> TopicIdPartition | None:
        """The partition as the remote tier keys it, when its topic is tiered here."""
        info = self.topics.get(name) if self.remote is not None else None
        if info is None or not is_tiered(info.configs):
            return None
        return TopicIdPartition(name, info.topic_id, partition)

    def _log_start(self, name: str, partition: int, local_start: int) -> int:
        """The log start a partition answers with: on a tiered topic the remote tier's."""
        tp = self._tiered(name, partition)
        if tp is None or self.remote is None:
            return local_start
        return self.remote.log_start_offset(name, tp.topic_id, partition, local_start)

    def _beyond_local(self, w: _Wanted, lp: LeaderPartition, part: PartitionPart, limit: int,
                      first: bool) -> ErrorCode:
        """An offset outside the local log: on a tiered topic a remote read (planned here, done
        by `_serve_remote`), OFFSET_MOVED_TO_TIERED_STORAGE for a follower, or as elsewhere
        OFFSET_OUT_OF_RANGE (`kafkapy.broker.remote_fetch`)."""
        tp = self._tiered(lp.topic, w.partition) if self.remote is not None else None
        if tp is None or self.remote is None:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        local_start = lp.log_start_offset
        part.log_start_offset = self.remote.log_start_offset(tp.topic, tp.topic_id, tp.partition, local_start)
        planned = self.remote.plan(tp, w.fetch_offset, local_start, follower=self.replica_id >= 0)
        if isinstance(planned, ErrorCode):
            return planned
        if self.remote_pending is None and (limit > 0 or first) and w.max_bytes > 0:
            max_offset = lp.last_stable_offset if self.read_committed else lp.high_watermark
            fetch = RemoteFetch(tp, w.fetch_offset, max(limit, 1), max_offset, planned,
                                read_committed=self.read_committed, min_one=first)
            self.remote_pending = (part, fetch, lp)
        return _NONE  # the other remote partitions answer empty this round, as Kafka's do

    def _follower_check(self, w: _Wanted, lp: LeaderPartition, part: PartitionPart) -> bool:
        """A follower's fetch: True when `part` is answered already, with a diverging epoch
        (v12+, KIP-279) or an error; its progress is reported once per request, not per long-poll wake-up."""
        diverging = self.partitions.follower_fetch(
            lp, self.replica_id, w.fetch_offset, w.last_fetched_epoch if self.version >= 12 else -1,
            w.log_start_offset, report=not w.follower_reported,
        )
        if isinstance(diverging, ErrorCode):
            part.error_code = diverging
            return True
        if diverging is not None:
            part.diverging_epoch = diverging
            part.high_watermark = lp.high_watermark
            return True
        w.follower_reported = True
        return False

    def _lookup(self, w: _Wanted, name: str) -> LeaderPartition | ErrorCode:
        """The partition's leader here, or for a consumer's Fetch v11+ any local replica."""
        lp = self.partitions.leader(name, w.partition, w.current_leader_epoch)
        w.read_from_follower = False
        if lp is ErrorCode.NOT_LEADER_OR_FOLLOWER and self.follower_reads:
            lp = self.partitions.replica(name, w.partition, w.current_leader_epoch)
            w.read_from_follower = isinstance(lp, LeaderPartition)
        return lp

    def _redirected(self, w: _Wanted, lp: LeaderPartition, part: PartitionPart) -> bool:
        """KIP-392 for a consumer: True when `part` is answered without data - the leader names
        a preferred read replica, or this follower cannot serve the offset (its error). An
        offset below a tiered follower's local log start is served from the remote tier, as the
        leader serves it (Kafka's follower fetch reads `RemoteLogManager` too)."""
        if w.read_from_follower:
            code = self.partitions.read_error_on_follower(lp, w.fetch_offset)
            if code is None or (code is ErrorCode.OFFSET_OUT_OF_RANGE and w.fetch_offset < lp.log_start_offset
                                and self._tiered(lp.topic, w.partition) is not None):
                return False  # below a tiered follower's local log: read from the remote tier
            part.error_code = code
            return True
        if not self.client_rack:
            return False
        preferred = self.partitions.preferred_read_replica(lp, w.fetch_offset, self.client_rack, self.listener)
        part.preferred_read_replica = preferred
        return preferred >= 0

    def _resolve(self, ref: TopicRef) -> tuple[str, uuid.UUID, ErrorCode]:
        if isinstance(ref, uuid.UUID):
            info = self.topics.by_id(ref)
            if info is None:
                return "", ref, ErrorCode.UNKNOWN_TOPIC_ID
            return info.name, ref, _NONE
        info = self.topics.get(ref)
        if info is None:
            return ref, _ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ref, info.topic_id, _NONE

    def _refusals(self) -> list[tuple[_Wanted, str, uuid.UUID, PartitionPart]]:
        out = []
        for w in self.refused or ():
            name, topic_id, _ = self._resolve(w.ref)
            part = PartitionPart(w.partition, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            out.append((w, name, topic_id, part))
        return out

    def _answered_without_read(self, w: _Wanted, lp: LeaderPartition, part: PartitionPart,
                               limit: int, total: int) -> bool | None:
        """None when the partition is to be read; else `part` is answered from its offsets
        alone and the value says whether that cuts a long poll short: a KIP-392 redirect or
        follower error, a follower's diverging epoch or error (True), no budget left (False).
        A consumer reading its leader with no rack id only pays the budget check."""
        if self.follower_reads:
            if (w.read_from_follower or self.client_rack) and self._redirected(w, lp, part):
                _offsets_of(lp, part)
                return True  # answered at once, as Kafka does
        elif self.replica_id >= 0:
            _offsets_of(lp, part)
            if self._follower_check(w, lp, part):
                return True
        if limit <= 0 and total > 0:
            _offsets_of(lp, part)
            return False
        return None

    def read(self) -> tuple[list[tuple[_Wanted, str, uuid.UUID, PartitionPart]], int, bool]:
        """(per-partition results, record bytes, any error)."""
        results: list[tuple[_Wanted, str, uuid.UUID, PartitionPart]] = []
        budget = self.max_bytes
        total = 0
        any_error = False
        follower = self.replica_id >= 0
        read = self.partitions.read
        self.remote_pending = None
        if self.refused:
            results.extend(self._refusals())
        for w in self.wanted:
            name, topic_id, code = self._resolve(w.ref)
            part = PartitionPart(w.partition, aborted=[] if self.read_committed else None)
            results.append((w, name, topic_id, part))
            if code is not _NONE:
                part.error_code = code
                any_error = True
                continue
            lp = self._lookup(w, name) if self.follower_reads else self.partitions.leader(
                name, w.partition, w.current_leader_epoch)
            if not isinstance(lp, LeaderPartition):  # (an enum's isinstance is slower)
                part.error_code = lp
                any_error = True
                continue
            limit = min(w.max_bytes, budget)
            answered = self._answered_without_read(w, lp, part, limit, total)
            if answered is not None:
                any_error = any_error or answered
                continue
            try:
                rr = read(lp, w.fetch_offset, max(limit, 1), read_committed=self.read_committed,
                          follower=follower)
            except OffsetOutOfRangeError:
                _offsets_of(lp, part)
                part.error_code = self._beyond_local(w, lp, part, limit, total == 0)
                any_error = any_error or part.error_code != _NONE
                continue
            except StorageError as e:
                _offsets_of(lp, part)
                part.error_code = e.error_code
                any_error = True
                continue
            part.high_watermark = rr.high_watermark
            part.last_stable_offset = rr.last_stable_offset
            part.log_start_offset = rr.log_start_offset if self.remote is None else self._log_start(
                name, w.partition, rr.log_start_offset)
            slices = rr.slices
            if not slices or w.max_bytes <= 0:
                continue
            size = slices[0].length if len(slices) == 1 else rr.size
            if size == 0 or (total > 0 and size > limit):
                continue
            part.records = [_region(s) for s in slices]
            if self.read_committed:
                part.aborted = self.partitions.aborted_transactions(
                    lp, w.fetch_offset, rr.last_stable_offset)
            total += size
            budget -= size
        return results, total, any_error


def _offsets_of(lp: LeaderPartition, part: PartitionPart) -> None:
    """The partition's offsets as answered when nothing was read."""
    part.log_start_offset = lp.log_start_offset
    part.high_watermark = lp.high_watermark
    part.last_stable_offset = lp.last_stable_offset


async def _load_producer_states(ports: RequestPorts, wanted: list[_Wanted]) -> None:
    """read_committed stops at the LSO, which a partition's producer state sets: load it
    first (once per partition; after a restart this is what finds open transactions)."""
    partitions = ports.partitions
    for w in wanted:
        info = ports.topics.by_id(w.ref) if isinstance(w.ref, uuid.UUID) else ports.topics.get(w.ref)
        if info is not None:
            await partitions.load_stable_offset(info.name, w.partition)


def _session_wanted(session: FetchSession) -> list[_Wanted]:
    return [
        _Wanted(ref, partition, sp.fetch_offset, sp.partition_max_bytes, sp)
        for (ref, partition), sp in session.partitions.items()
    ]


def _continue_session(session: FetchSession, req: FetchRequest, by_id: bool) -> set[PartitionKey]:
    """An incremental fetch: apply its changes to the session and advance its epoch; the
    partitions it named."""
    changes = [((w.ref, w.partition), w.fetch_offset, w.max_bytes) for w in _requested(req, by_id)]
    forgotten = [((t.topic_id if by_id else t.topic), p) for t in req.forgotten_topics_data for p in t.partitions]
    session.update(changes, forgotten)
    session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
    return {key for key, _, _ in changes}


def _idle(ports: RequestPorts, ref: TopicRef, partition: int, sp: SessionPartition) -> bool:
    """A follower's session partition with nothing to do: at the leader's end, told its
    offsets as they are, and still led here."""
    info = ports.topics.by_id(ref) if isinstance(ref, uuid.UUID) else ports.topics.get(ref)
    if info is None:
        return False
    plog = ports.local.logs.get(info.name, partition)
    return (
        plog is not None
        and plog.log_end_offset == sp.fetch_offset
        and plog.high_watermark == sp.sent_high_watermark
        and plog.log_start_offset == sp.sent_log_start_offset
        and plog.last_stable_offset == sp.sent_last_stable_offset
        and ports.replicas.leader_role(info.name, partition) is not None
    )


def _moved_wanted(ports: RequestPorts, session: FetchSession, moved: set[PartitionKey]) -> list[_Wanted]:
    """A follower's incremental fetch reads, answers and reports only the partitions it moved
    or that have news; an idle one counts as fetched at the request's arrival
    (`ReplicaManager.on_follower_request`), so thousands of idle partitions cost a few
    comparisons each instead of a read, a progress record and a long-poll wake-up each."""
    return [
        _Wanted(ref, partition, sp.fetch_offset, sp.partition_max_bytes, sp)
        for (ref, partition), sp in session.partitions.items()
        if (ref, partition) in moved or not _idle(ports, ref, partition, sp)
    ]


def _session_keys(ports: RequestPorts, session: FetchSession) -> list[tuple[str, int]]:
    """(topic, partition) of every session partition: what a follower's long poll waits on."""
    keys = []
    for ref, partition in session.partitions:
        info = ports.topics.by_id(ref) if isinstance(ref, uuid.UUID) else ports.topics.get(ref)
        if info is not None:
            keys.append((info.name, partition))
    return keys


def _new_session(cache: FetchSessionCache, req: FetchRequest, version: int, wanted: list[_Wanted],
                 now_ms_mono: int) -> FetchSession | None:
    """A full fetch: close the session it names, and open a new one when it asks (KIP-227)."""
    if version >= 7 and req.session_id != 0:
        cache.remove(req.session_id)
    if version < 7 or req.session_epoch != INITIAL_EPOCH:
        return None
    parts = {(w.ref, w.partition): SessionPartition(w.fetch_offset, w.max_bytes) for w in wanted}
    session = cache.create(parts, now_ms_mono, privileged=_replica_id(req, version) >= 0)
    if session is not None:
        for w in wanted:
            w.state = session.partitions[(w.ref, w.partition)]
    return session


async def _wait_for_bytes(
    ctx: RequestContext, reader: _Reader, req: FetchRequest, deadline: float,
    read: tuple[list[tuple[_Wanted, str, uuid.UUID, PartitionPart]], int, bool],
    idle_session: FetchSession | None = None,
) -> tuple[list[tuple[_Wanted, str, uuid.UUID, PartitionPart]], int, bool]:
    """The long poll: read again at every append to a fetched partition until min_bytes, an
    error or max_wait_ms (the turn is released: later requests of the connection go on).
    `idle_session`: a follower's session whose idle partitions were left out of `reader`;
    the poll waits on all of them and a wake-up picks the ones with news again."""
    ports = ctx.ports
    rt = runtime.get()
    results, total, any_error = read
    if idle_session is not None:
        keys = _session_keys(ports, idle_session)
    else:
        keys = [(name, w.partition) for w, name, _, _ in results if name]
    while not any_error and total < req.min_bytes and not ports.local.shutting_down and reader.remote_pending is None:
        if rt.current_time() >= deadline or not keys:
            break
        with ports.waiters.watch(keys) as woken:
            ctx.release_turn()
            with rt.move_on_at(deadline):
                await woken.wait()
        if idle_session is not None:
            reader.wanted = _moved_wanted(ports, idle_session, set())
        read = results, total, any_error = reader.read()
    return read


def _answer_topics(ports: RequestPorts, results: list[tuple[_Wanted, str, uuid.UUID, PartitionPart]],
                   incremental: bool, follower: bool) -> list[TopicPart]:
    """The response's topics: an incremental session leaves out what did not change - never a
    leader's preferred read replica (KIP-392), which is news in itself (Kafka's
    `maybeUpdateResponseData`: kafka-python drops its cached replica on every follower answer
    and asks the leader again at an unchanged high watermark; left out, it would spin there
    with nothing to read). The records' file descriptors are duplicated (the segment may close
    before they are sent)."""
    topics: list[TopicPart] = []
    tp: TopicPart | None = None  # the last topic: a topic's partitions arrive together
    fetched = ports.stats.fetched
    for w, name, topic_id, part in results:
        state = w.state
        if state is not None:
            if incremental and not (part.records or part.error_code or part.preferred_read_replica >= 0
                                    or state.changed(part.high_watermark, part.log_start_offset,
                                                     part.last_stable_offset)):
                continue
            state.mark_sent(part.high_watermark, part.log_start_offset, part.last_stable_offset)
        ref_name = name if name or not isinstance(w.ref, str) else w.ref
        if tp is None or tp.name != ref_name or (tp.topic_id is not topic_id and tp.topic_id != topic_id):
            tp = TopicPart(ref_name, topic_id)
            topics.append(tp)
        tp.partitions.append(part)
        records = part.records
        if records:
            size = 0
            for i, r in enumerate(records):
                if isinstance(r, FileRegion):
                    size += r.length
                    records[i] = _keep(r)
                else:
                    size += len(r)
            fetched(ref_name, size, follower=follower, read_from_follower=w.read_from_follower)
    return topics


def _region(piece: FileSlice) -> FileRegion | bytes:
    """A slice as the answer carries it: a small one read at once (the connection would copy
    it rather than sendfile it anyway, and the bytes outlive the segment's fd, so `_keep` has
    no fd to duplicate and close), else a region of the segment's file."""
    length = piece.length
    if length < SENDFILE_MIN_BYTES:
        data = os.pread(piece.fd, length, piece.position)
        if len(data) == length:
            return data
    return FileRegion(piece.fd, piece.position, length)


def _keep(region: FileRegion) -> FileRegion | bytes:
    """A region the answer can still send once the segment closed: a small one read now (see
    `_region`), else one on a duplicated fd."""
    if region.length < SENDFILE_MIN_BYTES:
        data = os.pread(region.fd, region.length, region.position)
        if len(data) == region.length:
            return data
    return FileRegion(os.dup(region.fd), region.position, region.length)


@handler(ApiKey.FETCH, min_version=4, max_version=17, error_response=fetch_error_response)
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> RawResponse:
    ports = ctx.ports
    version = ctx.api_version
    by_id = version >= 13
    now = runtime.get().current_time()
    now_ms_mono = int(now * 1000)
    session: FetchSession | None = None
    incremental = False
    response_session_id = 0
    cache = ports.fetch_sessions

    if version >= 7 and req.session_epoch != FINAL_EPOCH and req.session_epoch != INITIAL_EPOCH:
        session = cache.get(req.session_id, now_ms_mono)
        if session is None:
            return encode_fetch_response(version, [], error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != req.session_epoch:
            return encode_fetch_response(version, [], error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        moved = _continue_session(session, req, by_id)
        follower = _replica_id(req, version) >= 0
        wanted = _moved_wanted(ports, session, moved) if follower else _session_wanted(session)
        incremental = True
        response_session_id = session.session_id
    else:
        wanted = _requested(req, by_id)
        session = _new_session(cache, req, version, wanted, now_ms_mono)
        if session is not None:
            response_session_id = session.session_id

    refused: list[_Wanted] | None = None
    if ports.authorizer is not None:
        wanted, refused = _authorize(ctx, req, wanted)
    if version >= 4 and req.isolation_level == READ_COMMITTED:
        await _load_producer_states(ports, wanted)
    reader = _Reader(ports, req, version, wanted, refused, ctx.connection.listener_name)
    metered = reader.replica_id < 0 and ports.quotas.enabled(CONSUMER_BYTE_RATE)
    if metered:
        throttle = ports.quotas.throttle_ms(CONSUMER_BYTE_RATE, ctx.user, ctx.header.client_id or "", quota_ms())
        if throttle:
            ctx.throttle_ms = throttle
            return encode_fetch_response(version, [], session_id=response_session_id, throttle_time_ms=throttle)
    idle_skipped = incremental and reader.replica_id >= 0 and not refused
    if reader.replica_id >= 0 and not refused:
        ports.replicas.on_follower_request(reader.replica_id)
    read = reader.read()
    if reader.remote_pending is None and not read[2] and read[1] < req.min_bytes:
        read = await _wait_for_bytes(ctx, reader, req, now + max(req.max_wait_ms, 0) / 1000, read,
                                     session if idle_skipped else None)
    if reader.remote_pending is not None:
        await _serve_remote(ctx, reader)
    results = read[0]
    topics = _answer_topics(ports, results, incremental, reader.replica_id >= 0)
    if session is not None:
        _rotate(session, [w for w, _, _, part in results if part.records])
    throttle = _record_fetched(ctx, topics) if metered else 0
    return encode_fetch_response(version, topics, session_id=response_session_id, throttle_time_ms=throttle)


def _record_fetched(ctx: RequestContext, topics: list[TopicPart]) -> int:
    """Count the record bytes sent against the client's consumer quota; the throttle time."""
    size = sum(part.records_size for t in topics for part in t.partitions)
    throttle = ctx.quotas.record(CONSUMER_BYTE_RATE, ctx.user, ctx.header.client_id or "", size, quota_ms())
    ctx.throttle_ms = max(ctx.throttle_ms, throttle)
    return throttle


def _rotate(session: FetchSession, served: list[_Wanted]) -> None:
    """Move partitions that just returned data to the back of the session's order, so a busy
    partition cannot take the whole response budget fetch after fetch (Kafka does the same)."""
    for w in served:
        key = (w.ref, w.partition)
        state = session.partitions.pop(key, None)
        if state is not None:
            session.partitions[key] = state


async def _serve_remote(ctx: RequestContext, reader: _Reader) -> None:
    """Read the request's remote partition on a worker thread (Kafka's DelayedRemoteFetch):
    the connection's later requests go on meanwhile; past `remote.fetch.max.wait.ms` the
    partition answers empty, a store failure answers UNKNOWN_SERVER_ERROR for it alone."""
    tier, pending = reader.remote, reader.remote_pending
    assert tier is not None
    assert pending is not None
    part, fetch, lp = pending
    rt = runtime.get()
    stats = ctx.ports.stats
    topic = fetch.partition.topic
    stats.remote_fetch_requests[topic] += 1
    if tier.limiter is None:
        tier.limiter = rt.thread_limiter(tier.reader_threads)
    ctx.release_turn()
    fetched = None
    with rt.move_on_after(tier.fetch_max_wait_ms / 1000):
        try:
            fetched = await rt.run_sync_in_thread(tier.read, fetch, limiter=tier.limiter,
                                                  abandon_on_cancel=True)
        except Exception as e:  # whatever the store or the bytes did: this partition's error only
            part.error_code = remote_read_failure(fetch.partition, e)
            stats.remote_fetch_errors[topic] += 1
            return
    if fetched is None or not fetched.records:
        return
    part.records = [fetched.records]
    stats.remote_fetch_bytes[topic] += len(fetched.records)
    if fetch.read_committed:
        aborted = [(e.producer_id, e.first_offset) for e in fetched.aborted]
        if not fetched.aborted_complete:
            try:
                aborted += reader.partitions.aborted_transactions(lp, fetch.fetch_offset, fetched.next_offset)
            except StorageError:
                part.records, part.error_code = [], ErrorCode.UNKNOWN_SERVER_ERROR
                return
        part.aborted = aborted
