"""ListOffsets (key 2): v1-10.

Behaviour per partition, by the requested timestamp:
- -2 EARLIEST: the log start offset - on a tiered topic (KIP-405) the remote tier's first
  offset when it has one below the local log.
- -4 EARLIEST_LOCAL (KIP-405): the local log start offset (the log start on a topic that is
  not tiered).
- -5 LATEST_TIERED (KIP-1005): the last offset copied to the remote tier, -1 when none is (or
  the topic is not tiered), with the leader epoch of that offset.
- -1 LATEST: the high watermark (read_uncommitted) or the last stable offset (read_committed).
- -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the first record carrying the largest
  timestamp (KIP-734; the log answers from its time indexes).
- t >= 0: the first offset whose record timestamp is >= t, with that timestamp; none -> -1/-1.
  A tiered partition searches its remote segments' time indexes first (on a worker thread,
  within the request's timeout_ms from v10, else 30 s: REQUEST_TIMED_OUT past it; a store
  failure answers UNKNOWN_SERVER_ERROR, as Kafka's `Errors.forException` does), then the local
  log, as Kafka's `UnifiedLog.fetchOffsetByTimestamp`.
Offsets at or past the visible limit are not returned (LATEST is the HW the ISR reached). The
answer carries the partition's leader epoch (0 on one node); a tiered partition's EARLIEST,
EARLIEST_LOCAL, LATEST_TIERED and remote timestamp answers carry the epoch of the offset.
Errors (`kafkapy.broker.partitions`, as for every partition API): UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER off the leader, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the
client's current_leader_epoch (v4+) is behind / ahead of the leader's.

Authorization: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.

Not yet: v0 (old_style_offsets, multiple offsets per partition).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker import runtime
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.partitions import EARLIEST, EARLIEST_LOCAL, LATEST_TIERED, LeaderPartition
from kafkapy.broker.remote_fetch import RemoteTier, epoch_for_offset, is_tiered, remote_read_failure
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkapy.protocol.messages.list_offsets import (
    ListOffsetsResponse_ListOffsetsPartitionResponse as PartitionAnswer,
)
from kafkapy.storage.errors import StorageError
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata import RemoteLogSegmentMetadata

__all__ = ["handle_list_offsets"]

Partition = ListOffsetsResponse.ListOffsetsPartitionResponse
REMOTE_LIST_OFFSETS_TIMEOUT_MS = 30_000  # Kafka's `remote.list.offsets.request.timeout.ms`


@handler(ApiKey.LIST_OFFSETS, min_version=1, max_version=10)
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    partitions = ctx.partitions
    version = ctx.api_version
    read_committed = version >= 2 and req.isolation_level == 1
    response = ListOffsetsResponse()
    denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    for topic in req.topics:
        out = ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name)
        response.topics.append(out)
        for p in topic.partitions:
            part = Partition(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
            out.partitions.append(part)
            if topic.name in denied:
                part.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            lp = partitions.leader(topic.name, p.partition_index, p.current_leader_epoch if version >= 4 else -1)
            if isinstance(lp, ErrorCode):
                part.error_code = lp
                continue
            if ctx.ports.remote_tier is not None and await _tiered_answer(
                    ctx, ctx.ports.remote_tier, lp, p.timestamp, part, req.timeout_ms if version >= 10 else 0,
                    read_committed=read_committed):
                continue
            try:
                part.offset, part.timestamp = await partitions.offset_for_timestamp(
                    lp, p.timestamp, read_committed=read_committed
                )
            except ValueError:
                part.error_code = ErrorCode.INVALID_REQUEST
                continue
            except StorageError as e:
                part.error_code = e.error_code
                continue
            part.leader_epoch = lp.leader_epoch if part.offset >= 0 else -1
    return response


async def _tiered_answer(
    ctx: RequestContext, tier: RemoteTier, lp: LeaderPartition, timestamp: int, part: PartitionAnswer,
    timeout_ms: int, *, read_committed: bool,
) -> bool:
    """Answer `part` from both tiers when the topic is tiered and the question is one the remote
    tier changes (module doc); False: the local log's answer is the partition's."""
    info = ctx.topics.get(lp.topic)
    if info is None or not is_tiered(info.configs):
        return False
    tp = TopicIdPartition(lp.topic, info.topic_id, lp.partition)
    cache = tier.metadata.cache(tp)
    local_start = lp.log_start_offset
    readable = cache.readable_segments() if cache is not None else []
    if timestamp == EARLIEST_LOCAL:
        _set(part, local_start, epoch_for_offset(lp.log.leader_epochs.entries, local_start), lp)
    elif timestamp == LATEST_TIERED:
        last = max(readable, key=lambda s: s.end_offset, default=None)
        if last is None:
            part.offset, part.leader_epoch = -1, -1
        else:
            _set(part, last.end_offset, epoch_for_offset(last.segment_leader_epochs, last.end_offset), lp)
    elif timestamp == EARLIEST:
        start = cache.log_start_offset() if cache is not None else None  # DeleteRecords included
        if not readable or start is None or start >= local_start:
            return False
        first = cache.segment_for_offset(start) if cache is not None else None
        epochs = (first or readable[0]).segment_leader_epochs
        _set(part, start, epoch_for_offset(epochs, start), lp)
    elif timestamp >= 0 and any(s.max_timestamp_ms >= timestamp for s in readable):
        limit = lp.last_stable_offset if read_committed else lp.high_watermark
        return await _remote_timestamp(tier, tp, tuple(readable), timestamp, part, lp, timeout_ms, limit)
    else:
        return False
    return True


def _set(part: PartitionAnswer, offset: int, epoch: int, lp: LeaderPartition) -> None:
    part.offset, part.timestamp = offset, -1
    part.leader_epoch = epoch if epoch >= 0 else lp.leader_epoch


async def _remote_timestamp(
    tier: RemoteTier, tp: TopicIdPartition, segments: tuple[RemoteLogSegmentMetadata, ...], timestamp: int,
    part: PartitionAnswer, lp: LeaderPartition, timeout_ms: int, limit: int,
) -> bool:
    """The remote tier's answer to a timestamp (worker thread); False: no remote record is
    that recent, the local log answers."""
    rt = runtime.get()
    if tier.limiter is None:
        tier.limiter = rt.thread_limiter(tier.reader_threads)
    cache = tier.metadata.cache(tp)
    remote_start = cache.log_start_offset() if cache is not None else None  # DeleteRecords included
    start = min(segments[0].start_offset if remote_start is None else remote_start, lp.log_start_offset)
    hit = None
    with rt.move_on_after((timeout_ms if timeout_ms > 0 else REMOTE_LIST_OFFSETS_TIMEOUT_MS) / 1000) as scope:
        try:
            hit = await rt.run_sync_in_thread(tier.offset_for_timestamp, segments, timestamp, start,
                                              limiter=tier.limiter, abandon_on_cancel=True)
        except Exception as e:  # whatever the store or the bytes did: this partition's error only
            part.error_code = remote_read_failure(tp, e)
            return True
    if scope.cancelled_caught:
        part.error_code = ErrorCode.REQUEST_TIMED_OUT
        return True
    if hit is None or hit[0] >= limit:
        return False
    part.offset, part.timestamp = hit[0], hit[1]
    part.leader_epoch = hit[2] if hit[2] >= 0 else lp.leader_epoch
    return True
