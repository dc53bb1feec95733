"""Raft messages <-> Kafka wire messages (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot).

The log entries travel as record batches (`entries_to_batches` / `entries_from_batches`, the
metadata log's on-disk form as well). In the raft package, beside the messages it maps, so the
node's driver (kafkapy.server) and the quorum handlers (kafkapy.broker) share it.

Why a module of its own: the driver (sending requests, reading responses) and the quorum
handlers (reading requests, sending responses) both need both directions, and the mapping is
1:1 field work best kept in one place. The wire messages carry one topic (`__cluster_metadata`,
by name in the quorum APIs, by topic id in Fetch) with one partition (0) and the cluster id;
anything else is a request for a partition we do not have.

Versions sent: Vote v0, BeginQuorumEpoch v0, EndQuorumEpoch v0 (its preferred successors are a
plain id list), Fetch v13 (topic ids, replica id in the top level; the snapshot id is a tagged
field), FetchSnapshot v0 (a chunk of at most `max_bytes`). Requests of any version the codec
speaks are accepted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batches,
    validate_batch,
)
from kafkapy.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    RaftResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)

__all__ = [
    "FETCH_VERSION",
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "WireRequest",
    "entries_from_batches",
    "entries_to_batches",
    "request_from_wire",
    "request_to_wire",
    "response_from_wire",
    "response_to_wire",
]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
#: Kafka's fixed topic id of the metadata topic
METADATA_TOPIC_ID = uuid.UUID(int=1)
def entries_to_batches(entries: Sequence[Entry], *, timestamp_ms: int | None = None) -> bytes:
    """Entries as record batches: one batch per run of one epoch (partition leader epoch =
    that epoch), one record per entry with the entry's bytes as its value."""
    if not entries:
        return b""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    out = bytearray()
    start = 0
    for i in range(1, len(entries) + 1):
        if i == len(entries) or entries[i].epoch != entries[start].epoch:
            run = entries[start:i]
            records = [
                Record(offset_delta=j, timestamp_delta=0, key=None, value=e.data, headers=[])
                for j, e in enumerate(run)
            ]
            out += build_batch(
                records,
                base_offset=run[0].offset,
                base_timestamp=ts,
                partition_leader_epoch=run[0].epoch,
            )
            start = i
    return bytes(out)


def entries_from_batches(
    data: bytes | bytearray | memoryview, *, first_offset: int = 0
) -> list[Entry]:
    """The entries in `data` (whole record batches) at or above `first_offset`, in order.

    Raises ProtocolError (CorruptRecordError / InvalidRecordError) on malformed batches."""
    buf = bytes(data)
    entries: list[Entry] = []
    for pos, header in iter_batches(buf):
        validate_batch(buf, pos, header, allow_compacted=True)  # CRC: peers' bytes are untrusted
        for record in decode_records(buf, pos, header):
            offset = header.base_offset + record.offset_delta
            if offset >= first_offset:
                entries.append(
                    Entry(offset, header.partition_leader_epoch, bytes(record.value or b""))
                )
    return entries


FETCH_VERSION = 13
#: Pre-vote (KIP-996) rides on Vote v0 as a tagged field of the partition (Kafka's Vote v2
#: PreVote field is not in our codec yet); only kafkapy nodes send or read it. A node without
#: pre-vote support would take such a request as a real vote: mixed versions are not supported.
PRE_VOTE_TAG = 0x6B71
#: The leader's clock in Fetch / FetchSnapshot answers, echoed by the fetcher in its next
#: request (int64, big-endian, a tagged field of the partition; only kafkapy nodes send or
#: read it): how a leader knows a voter heard from it lately (`RaftCore.has_quorum_contact`).
#: Without it a voter confirms nothing, and a leader without confirmations resigns.
LEADER_CLOCK_TAG = 0x6B72
_VERSIONS = {
    ApiKey.VOTE: 0,
    ApiKey.BEGIN_QUORUM_EPOCH: 0,
    ApiKey.END_QUORUM_EPOCH: 0,
    ApiKey.FETCH: FETCH_VERSION,
    ApiKey.FETCH_SNAPSHOT: 0,
}


class WrongPartitionError(ProtocolError):
    """A quorum request for something other than `__cluster_metadata-0` (or another cluster)."""


@dataclass(frozen=True, slots=True)
class WireRequest:
    api_key: ApiKey
    version: int
    body: object


def _set_clock(tagged: dict[int, bytes], clock_ms: int) -> None:
    if clock_ms >= 0:
        tagged[LEADER_CLOCK_TAG] = clock_ms.to_bytes(8, "big", signed=True)


def _clock(tagged: dict[int, bytes]) -> int:
    raw = tagged.get(LEADER_CLOCK_TAG)
    if raw is None or len(raw) != 8:
        return -1
    return int.from_bytes(raw, "big", signed=True)


def _leader(leader_id: int | None) -> int:
    return -1 if leader_id is None else leader_id


def _maybe(leader_id: int) -> int | None:
    return None if leader_id < 0 else leader_id


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


# ---------------------------------------------------------------- requests


def request_to_wire(
    req: RaftRequest, *, cluster_id: str, dst: int, max_wait_ms: int, max_bytes: int
) -> WireRequest:
    """The wire request for `req` to voter `dst`."""
    body: object
    match req:
        case VoteRequest():
            body = _vote_request(req, cluster_id, dst)
        case BeginQuorumEpochRequest():
            body = _begin_quorum_epoch_request(req, cluster_id, dst)
        case EndQuorumEpochRequest():
            body = _end_quorum_epoch_request(req, cluster_id)
        case FetchRequest():
            body = _fetch_request(req, cluster_id, max_wait_ms, max_bytes)
        case FetchSnapshotRequest():
            body = _fetch_snapshot_request(req, cluster_id, max_bytes)
    key = _KEYS[type(req)]
    return WireRequest(key, _VERSIONS[key], body)


def _vote_request(req: VoteRequest, cluster_id: str, dst: int) -> m.VoteRequest:
    part = m.VoteRequest.PartitionData(
        partition_index=METADATA_PARTITION,
        candidate_epoch=req.candidate_epoch,
        candidate_id=req.candidate_id,
        last_offset_epoch=req.last_offset_epoch,
        last_offset=req.last_offset,
    )
    if req.pre_vote:
        part.unknown_tagged_fields[PRE_VOTE_TAG] = b"\x01"
    return m.VoteRequest(
        cluster_id=cluster_id,
        voter_id=dst,
        topics=[m.VoteRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])],
    )


def _begin_quorum_epoch_request(
    req: BeginQuorumEpochRequest, cluster_id: str, dst: int
) -> m.BeginQuorumEpochRequest:
    part = m.BeginQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION, leader_id=req.leader_id, leader_epoch=req.leader_epoch
    )
    return m.BeginQuorumEpochRequest(
        cluster_id=cluster_id,
        voter_id=dst,
        topics=[m.BeginQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])],
    )


def _end_quorum_epoch_request(
    req: EndQuorumEpochRequest, cluster_id: str
) -> m.EndQuorumEpochRequest:
    part = m.EndQuorumEpochRequest.PartitionData(
        partition_index=METADATA_PARTITION,
        leader_id=req.leader_id,
        leader_epoch=req.leader_epoch,
        preferred_successors=list(req.preferred_successors),
    )
    return m.EndQuorumEpochRequest(
        cluster_id=cluster_id,
        topics=[m.EndQuorumEpochRequest.TopicData(topic_name=METADATA_TOPIC, partitions=[part])],
    )


def _fetch_request(
    req: FetchRequest, cluster_id: str, max_wait_ms: int, max_bytes: int
) -> m.FetchRequest:
    part = m.FetchRequest.FetchPartition(
        partition=METADATA_PARTITION,
        current_leader_epoch=req.current_leader_epoch,
        fetch_offset=req.fetch_offset,
        last_fetched_epoch=req.last_fetched_epoch,
        partition_max_bytes=max_bytes,
    )
    _set_clock(part.unknown_tagged_fields, req.leader_clock_ms)
    return m.FetchRequest(
        cluster_id=cluster_id,
        replica_id=req.replica_id,
        replica_state=m.FetchRequest.ReplicaState(replica_id=req.replica_id),
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        topics=[
            m.FetchRequest.FetchTopic(
                topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part]
            )
        ],
    )


def _fetch_snapshot_request(
    req: FetchSnapshotRequest, cluster_id: str, max_bytes: int
) -> m.FetchSnapshotRequest:
    part = m.FetchSnapshotRequest.PartitionSnapshot(
        partition=METADATA_PARTITION,
        current_leader_epoch=req.current_leader_epoch,
        snapshot_id=m.FetchSnapshotRequest.SnapshotId(
            end_offset=req.snapshot_id.end_offset, epoch=req.snapshot_id.epoch
        ),
        position=req.position,
    )
    _set_clock(part.unknown_tagged_fields, req.leader_clock_ms)
    return m.FetchSnapshotRequest(
        cluster_id=cluster_id,
        replica_id=req.replica_id,
        max_bytes=min(max_bytes, req.max_bytes),
        topics=[m.FetchSnapshotRequest.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])],
    )


_KEYS: dict[type, ApiKey] = {
    VoteRequest: ApiKey.VOTE,
    BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
    FetchRequest: ApiKey.FETCH,
    FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT,
}


def _one(parts: list[object] | None, what: str) -> object:
    if not parts or len(parts) != 1:
        raise WrongPartitionError(f"{what}: expected exactly one partition of {METADATA_TOPIC}")
    return parts[0]


def _check_cluster(cluster_id: str | None, ours: str) -> None:
    if cluster_id is not None and cluster_id != "" and cluster_id != ours:
        err = WrongPartitionError(f"cluster id {cluster_id!r} is not ours ({ours!r})")
        err.error_code = ErrorCode.INCONSISTENT_CLUSTER_ID
        raise err


def request_from_wire(
    api_key: ApiKey, version: int, body: object, *, cluster_id: str, local_id: int | None = None
) -> tuple[int, RaftRequest]:
    """(source replica id or -1, Raft request) from a wire request; raises WrongPartitionError.

    `local_id`: Vote / BeginQuorumEpoch v1+ name the voter they are meant for; one meant for
    another node (an address that moved) gets INVALID_VOTER_KEY instead of being acted on."""
    if isinstance(body, m.VoteRequest | m.BeginQuorumEpochRequest) and version >= 1:
        _check_voter(body.voter_id, local_id)
    if isinstance(body, m.VoteRequest):
        return _vote_from_wire(body, cluster_id)
    if isinstance(body, m.BeginQuorumEpochRequest):
        return _begin_quorum_epoch_from_wire(body, cluster_id)
    if isinstance(body, m.EndQuorumEpochRequest):
        return _end_quorum_epoch_from_wire(body, cluster_id)
    if isinstance(body, m.FetchRequest):
        return _fetch_from_wire(body, version, cluster_id)
    if isinstance(body, m.FetchSnapshotRequest):
        return _fetch_snapshot_from_wire(body, cluster_id)
    raise WrongPartitionError(f"not a quorum request: {api_key.name}")


def _vote_from_wire(body: m.VoteRequest, cluster_id: str) -> tuple[int, RaftRequest]:
    _check_cluster(body.cluster_id, cluster_id)
    topic = _one(list(body.topics), "Vote")
    assert isinstance(topic, m.VoteRequest.TopicData)
    p = _one(list(topic.partitions), "Vote")
    assert isinstance(p, m.VoteRequest.PartitionData)
    _check_partition(topic.topic_name, p.partition_index)
    pre_vote = p.unknown_tagged_fields.get(PRE_VOTE_TAG) == b"\x01"
    return p.candidate_id, VoteRequest(
        p.candidate_epoch, p.candidate_id, p.last_offset_epoch, p.last_offset, pre_vote
    )


def _begin_quorum_epoch_from_wire(
    body: m.BeginQuorumEpochRequest, cluster_id: str
) -> tuple[int, RaftRequest]:
    _check_cluster(body.cluster_id, cluster_id)
    topic = _one(list(body.topics), "BeginQuorumEpoch")
    assert isinstance(topic, m.BeginQuorumEpochRequest.TopicData)
    p = _one(list(topic.partitions), "BeginQuorumEpoch")
    assert isinstance(p, m.BeginQuorumEpochRequest.PartitionData)
    _check_partition(topic.topic_name, p.partition_index)
    return p.leader_id, BeginQuorumEpochRequest(p.leader_id, p.leader_epoch)


def _end_quorum_epoch_from_wire(
    body: m.EndQuorumEpochRequest, cluster_id: str
) -> tuple[int, RaftRequest]:
    _check_cluster(body.cluster_id, cluster_id)
    topic = _one(list(body.topics), "EndQuorumEpoch")
    assert isinstance(topic, m.EndQuorumEpochRequest.TopicData)
    p = _one(list(topic.partitions), "EndQuorumEpoch")
    assert isinstance(p, m.EndQuorumEpochRequest.PartitionData)
    _check_partition(topic.topic_name, p.partition_index)
    successors = tuple(p.preferred_successors) or tuple(
        c.candidate_id for c in p.preferred_candidates
    )
    return p.leader_id, EndQuorumEpochRequest(p.leader_id, p.leader_epoch, successors)


def _fetch_from_wire(
    body: m.FetchRequest, version: int, cluster_id: str
) -> tuple[int, RaftRequest]:
    _check_cluster(body.cluster_id, cluster_id)
    topic = _one(list(body.topics), "Fetch")
    assert isinstance(topic, m.FetchRequest.FetchTopic)
    if version >= 13 and topic.topic_id != METADATA_TOPIC_ID:
        raise WrongPartitionError(f"Fetch: topic id {topic.topic_id} is not {METADATA_TOPIC}")
    p = _one(list(topic.partitions), "Fetch")
    assert isinstance(p, m.FetchRequest.FetchPartition)
    _check_partition(METADATA_TOPIC if version >= 13 else topic.topic, p.partition)
    replica = body.replica_state.replica_id if version >= 15 else body.replica_id
    if p.fetch_offset < 0 or p.last_fetched_epoch < 0:
        raise WrongPartitionError("Fetch: negative fetch offset or last fetched epoch")
    return replica, FetchRequest(
        replica,
        p.fetch_offset,
        p.last_fetched_epoch,
        p.current_leader_epoch,
        _clock(p.unknown_tagged_fields),
    )


def _fetch_snapshot_from_wire(
    body: m.FetchSnapshotRequest, cluster_id: str
) -> tuple[int, RaftRequest]:
    _check_cluster(body.cluster_id, cluster_id)
    topic = _one(list(body.topics), "FetchSnapshot")
    assert isinstance(topic, m.FetchSnapshotRequest.TopicSnapshot)
    p = _one(list(topic.partitions), "FetchSnapshot")
    assert isinstance(p, m.FetchSnapshotRequest.PartitionSnapshot)
    _check_partition(topic.name, p.partition)
    sid = p.snapshot_id
    if sid.end_offset < 0 or sid.epoch < 0:
        raise WrongPartitionError("FetchSnapshot: negative snapshot id")
    return body.replica_id, FetchSnapshotRequest(
        body.replica_id,
        SnapshotId(sid.end_offset, sid.epoch),
        p.position,
        p.current_leader_epoch,
        body.max_bytes,
        _clock(p.unknown_tagged_fields),
    )


def _check_voter(voter_id: int, local_id: int | None) -> None:
    if local_id is not None and voter_id >= 0 and voter_id != local_id:
        err = WrongPartitionError(f"request meant for voter {voter_id}, this is node {local_id}")
        err.error_code = ErrorCode.INVALID_VOTER_KEY
        raise err


def _check_partition(topic: str, partition: int) -> None:
    if topic != METADATA_TOPIC or partition != METADATA_PARTITION:
        err = WrongPartitionError(f"{topic}-{partition} is not the metadata partition")
        err.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        raise err


# ---------------------------------------------------------------- responses


def response_to_wire(resp: RaftResponse) -> object:
    """The wire response body for a Raft response (Fetch v13+ shape for Fetch)."""
    match resp:
        case VoteResponse():
            vote = m.VoteResponse.PartitionData(
                partition_index=METADATA_PARTITION,
                error_code=int(resp.error),
                leader_id=_leader(resp.leader_id),
                leader_epoch=resp.leader_epoch,
                vote_granted=resp.vote_granted,
            )
            return m.VoteResponse(
                topics=[m.VoteResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[vote])]
            )
        case BeginQuorumEpochResponse():
            begin = m.BeginQuorumEpochResponse.PartitionData(
                partition_index=METADATA_PARTITION,
                error_code=int(resp.error),
                leader_id=_leader(resp.leader_id),
                leader_epoch=resp.leader_epoch,
            )
            return m.BeginQuorumEpochResponse(
                topics=[
                    m.BeginQuorumEpochResponse.TopicData(
                        topic_name=METADATA_TOPIC, partitions=[begin]
                    )
                ]
            )
        case EndQuorumEpochResponse():
            end = m.EndQuorumEpochResponse.PartitionData(
                partition_index=METADATA_PARTITION,
                error_code=int(resp.error),
                leader_id=_leader(resp.leader_id),
                leader_epoch=resp.leader_epoch,
            )
            return m.EndQuorumEpochResponse(
                topics=[
                    m.EndQuorumEpochResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[end])
                ]
            )
        case FetchResponse():
            return _fetch_response(resp)
        case FetchSnapshotResponse():
            return _fetch_snapshot_response(resp)
    raise TypeError(f"not a Raft response: {resp!r}")


def _fetch_response(resp: FetchResponse) -> m.FetchResponse:
    part = m.FetchResponse.PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=int(resp.error),
        high_watermark=resp.high_watermark,
        log_start_offset=0,
        current_leader=m.FetchResponse.LeaderIdAndEpoch(
            leader_id=_leader(resp.leader_id), leader_epoch=resp.leader_epoch
        ),
        records=entries_to_batches(resp.entries),
    )
    _set_clock(part.unknown_tagged_fields, resp.leader_clock_ms)
    if resp.diverging_epoch is not None:
        part.diverging_epoch = m.FetchResponse.EpochEndOffset(
            epoch=resp.diverging_epoch[0], end_offset=resp.diverging_epoch[1]
        )
    if resp.snapshot_id is not None:
        part.snapshot_id = m.FetchResponse.SnapshotId(
            end_offset=resp.snapshot_id.end_offset, epoch=resp.snapshot_id.epoch
        )
    return m.FetchResponse(
        responses=[
            m.FetchResponse.FetchableTopicResponse(
                topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part]
            )
        ]
    )


def _fetch_snapshot_response(resp: FetchSnapshotResponse) -> m.FetchSnapshotResponse:
    part = m.FetchSnapshotResponse.PartitionSnapshot(
        index=METADATA_PARTITION,
        error_code=int(resp.error),
        snapshot_id=m.FetchSnapshotResponse.SnapshotId(
            end_offset=resp.snapshot_id.end_offset, epoch=resp.snapshot_id.epoch
        ),
        current_leader=m.FetchSnapshotResponse.LeaderIdAndEpoch(
            leader_id=_leader(resp.leader_id), leader_epoch=resp.leader_epoch
        ),
        size=resp.size,
        position=resp.position,
        unaligned_records=resp.data,
    )
    _set_clock(part.unknown_tagged_fields, resp.leader_clock_ms)
    return m.FetchSnapshotResponse(
        topics=[m.FetchSnapshotResponse.TopicSnapshot(name=METADATA_TOPIC, partitions=[part])]
    )


def response_from_wire(req: RaftRequest, body: object) -> RaftResponse:
    """The Raft response to `req` from the peer's wire response; raises ProtocolError when the
    answer does not fit (the driver treats that as a failed request)."""
    if isinstance(body, m.VoteResponse):
        p = _response_partition(body.error_code, body.topics, "Vote")
        assert isinstance(p, m.VoteResponse.PartitionData)
        return VoteResponse(
            _error(p.error_code), _maybe(p.leader_id), p.leader_epoch, p.vote_granted
        )
    if isinstance(body, m.BeginQuorumEpochResponse):
        p = _response_partition(body.error_code, body.topics, "BeginQuorumEpoch")
        assert isinstance(p, m.BeginQuorumEpochResponse.PartitionData)
        return BeginQuorumEpochResponse(_error(p.error_code), _maybe(p.leader_id), p.leader_epoch)
    if isinstance(body, m.EndQuorumEpochResponse):
        p = _response_partition(body.error_code, body.topics, "EndQuorumEpoch")
        assert isinstance(p, m.EndQuorumEpochResponse.PartitionData)
        return EndQuorumEpochResponse(_error(p.error_code), _maybe(p.leader_id), p.leader_epoch)
    if isinstance(body, m.FetchResponse):
        assert isinstance(req, FetchRequest)
        if body.error_code:
            raise ProtocolError(f"Fetch failed: {_error(body.error_code).name}")
        topic = _one(list(body.responses), "Fetch response")
        assert isinstance(topic, m.FetchResponse.FetchableTopicResponse)
        p = _one(list(topic.partitions), "Fetch response")
        assert isinstance(p, m.FetchResponse.PartitionData)
        diverging = None
        if p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
            diverging = (p.diverging_epoch.epoch, p.diverging_epoch.end_offset)
        snapshot = None
        if p.snapshot_id.end_offset >= 0 and p.snapshot_id.epoch >= 0:
            snapshot = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        entries = entries_from_batches(p.records or b"", first_offset=req.fetch_offset)
        return FetchResponse(
            _error(p.error_code),
            _maybe(p.current_leader.leader_id),
            p.current_leader.leader_epoch,
            p.high_watermark,
            diverging,
            entries,
            snapshot,
            _clock(p.unknown_tagged_fields),
        )
    if isinstance(body, m.FetchSnapshotResponse):
        assert isinstance(req, FetchSnapshotRequest)
        p = _response_partition(body.error_code, body.topics, "FetchSnapshot")
        assert isinstance(p, m.FetchSnapshotResponse.PartitionSnapshot)
        sid = SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        return FetchSnapshotResponse(
            _error(p.error_code),
            _maybe(p.current_leader.leader_id),
            p.current_leader.leader_epoch,
            sid,
            p.size,
            p.position,
            bytes(p.unaligned_records),
            _clock(p.unknown_tagged_fields),
        )
    raise ProtocolError(f"unexpected response {type(body).__name__}")


def _response_partition(error_code: int, topics: Sequence[object], what: str) -> object:
    if error_code:
        raise ProtocolError(f"{what} failed: {_error(error_code).name}")
    topic = _one(list(topics), f"{what} response")
    return _one(list(getattr(topic, "partitions", [])), f"{what} response")
