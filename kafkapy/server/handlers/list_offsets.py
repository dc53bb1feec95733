"""ListOffsets (key 2): v1-10.

Behaviour per partition, by the requested timestamp:
- -2 EARLIEST (and -4 EARLIEST_LOCAL, -5 EARLIEST_PENDING_UPLOAD: no tiered storage, so the
  same): the log start offset.
- -1 LATEST: the high watermark (read_uncommitted) or the last stable offset (read_committed).
- -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the first record carrying the largest
  timestamp (KIP-734; the log answers from its time indexes).
- t >= 0: the first offset whose record timestamp is >= t, with that timestamp; none -> -1/-1.
Offsets at or past the visible limit are not returned. The leader epoch is this node's (0).
Errors: UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the client's
current_leader_epoch (v4+) is behind / ahead of ours.

Cluster mode (docs/cluster.md; single-node behaviour is unchanged): only the leader answers
(else NOT_LEADER_OR_FOLLOWER), epochs are checked against the partition's leader epoch, which is
also the one returned; LATEST is the HW the ISR reached.

Not yet: v0 (old_style_offsets, multiple offsets per partition).
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkapy.server.broker import LEADER_EPOCH, Broker
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler
from kafkapy.storage.errors import StorageError
from kafkapy.storage.log import PartitionLog

__all__ = ["cluster_epoch_error", "epoch_error", "handle_list_offsets"]

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
Partition = ListOffsetsResponse.ListOffsetsPartitionResponse


def epoch_error(current_leader_epoch: int) -> ErrorCode | None:
    """Kafka's check of a client-supplied leader epoch against the leader's."""
    if current_leader_epoch < 0 or current_leader_epoch == LEADER_EPOCH:
        return None
    if current_leader_epoch < LEADER_EPOCH:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def cluster_epoch_error(broker: Broker, topic: str, partition: int, current_leader_epoch: int) -> tuple[ErrorCode | None, int]:
    """Cluster mode: (error, leader epoch) - NOT_LEADER_OR_FOLLOWER off the leader, else the
    client's epoch checked against the partition's."""
    assert broker.replicas is not None
    role = broker.replicas.leader_role(topic, partition)
    if role is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    if current_leader_epoch < 0 or current_leader_epoch == role.leader_epoch:
        return None, role.leader_epoch
    if current_leader_epoch < role.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, role.leader_epoch
    return ErrorCode.UNKNOWN_LEADER_EPOCH, role.leader_epoch


def _lookup(plog: PartitionLog, timestamp: int, read_committed: bool, version: int) -> tuple[int, int]:
    limit = plog.last_stable_offset if read_committed else plog.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
        return plog.log_start_offset, -1
    if timestamp == LATEST:
        return limit, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset(limit)
        return (found[0], found[1]) if found is not None else (-1, -1)
    if timestamp < 0:
        raise ValueError(f"unknown special timestamp {timestamp}")
    hit = plog.offset_for_timestamp(timestamp)
    if hit is None or hit[0] >= limit:
        return -1, -1
    return hit


@handler(ApiKey.LIST_OFFSETS, min_version=1, max_version=10)
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    version = ctx.api_version
    read_committed = version >= 2 and req.isolation_level == 1
    response = ListOffsetsResponse()
    for topic in req.topics:
        out = ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name)
        response.topics.append(out)
        for p in topic.partitions:
            part = Partition(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
            out.partitions.append(part)
            plog = broker.partition_log(topic.name, p.partition_index)
            if plog is None:
                part.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            leader_epoch = LEADER_EPOCH
            if broker.replicas is not None:
                fenced, leader_epoch = cluster_epoch_error(
                    broker, topic.name, p.partition_index, p.current_leader_epoch if version >= 4 else -1
                )
            else:
                fenced = epoch_error(p.current_leader_epoch) if version >= 4 else None
            if fenced is not None:
                part.error_code = fenced
                continue
            if read_committed:  # its producer state sets the LSO
                await broker.producer_states.ensure_loaded((topic.name, p.partition_index), plog)
            try:
                part.offset, part.timestamp = _lookup(plog, p.timestamp, read_committed, version)
            except ValueError:
                part.error_code = ErrorCode.INVALID_REQUEST
                continue
            except StorageError as e:
                part.error_code = e.error_code
                continue
            part.leader_epoch = leader_epoch if part.offset >= 0 else -1
    return response
