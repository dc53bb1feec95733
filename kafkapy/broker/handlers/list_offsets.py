"""ListOffsets (key 2): v1-10.

Behaviour per partition, by the requested timestamp:
- -2 EARLIEST (and -4 EARLIEST_LOCAL, -5 EARLIEST_PENDING_UPLOAD: no tiered storage, so the
  same): the log start offset.
- -1 LATEST: the high watermark (read_uncommitted) or the last stable offset (read_committed).
- -3 MAX_TIMESTAMP (v7+): the offset and timestamp of the first record carrying the largest
  timestamp (KIP-734; the log answers from its time indexes).
- t >= 0: the first offset whose record timestamp is >= t, with that timestamp; none -> -1/-1.
Offsets at or past the visible limit are not returned (LATEST is the HW the ISR reached). The
answer carries the partition's leader epoch (0 on one node).
Errors (`kafkapy.broker.partitions`, as for every partition API): UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER off the leader, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the
client's current_leader_epoch (v4+) is behind / ahead of the leader's.

Authorization: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.

Not yet: v0 (old_style_offsets, multiple offsets per partition).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kafkapy.storage.errors import StorageError

__all__ = ["handle_list_offsets"]

Partition = ListOffsetsResponse.ListOffsetsPartitionResponse


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
