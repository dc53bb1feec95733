"""The metadata quorum's APIs on the controller listener: Vote (52) v0-1, BeginQuorumEpoch (53)
v0-1, EndQuorumEpoch (54) v0-1, DescribeQuorum (55) v0-2, Fetch (1) v12-17 and FetchSnapshot (59)
v0-1 of `__cluster_metadata-0`.

Each handler maps the wire request to the Raft message (`raft_wire`), lets the node's
`RaftDriver` answer it (the driver persists what the answer relies on before returning), and
maps the answer back. Fetch long-polls: an answer with nothing new waits up to the request's
`max_wait_ms` for the log or the high watermark to move; it releases the connection's turn
first, so a Vote or BeginQuorumEpoch behind it on the same connection is not held up.

FetchSnapshot serves chunks of the leader's snapshot files (KIP-630) of at most the request's
`max_bytes` and the core's chunk size (1 MiB); it does not fill in v1's node endpoints yet.

Bad input - another cluster's id, a topic or partition other than the metadata partition -
gets an error code, never a crash.
"""

from __future__ import annotations

import time

from kafkapy.broker.clock import loop_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import controller_handler
from kafkapy.broker.request_ports import QuorumPeer
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft import FetchRequest as RaftFetchRequest
from kafkapy.raft.wire import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    request_from_wire,
    response_to_wire,
)

__all__ = [
    "handle_begin_quorum_epoch",
    "handle_describe_quorum",
    "handle_end_quorum_epoch",
    "handle_fetch_snapshot",
    "handle_metadata_fetch",
    "handle_vote",
]

#: a Fetch never waits longer than this at the leader, whatever it asks for
MAX_FETCH_WAIT_MS = 1000


def _driver(ctx: RequestContext) -> QuorumPeer:
    return ctx.quorum


async def _answer(
    ctx: RequestContext, api_key: ApiKey, req: object
) -> tuple[ErrorCode, object | None]:
    """(top-level error, wire response body or None when the error stands alone)."""
    driver = _driver(ctx)
    try:
        src, raft_req = request_from_wire(
            api_key,
            ctx.api_version,
            req,
            cluster_id=ctx.local.cluster_id,
            local_id=ctx.local.node_id,
        )
    except ProtocolError as exc:
        return exc.error_code, None
    if isinstance(raft_req, RaftFetchRequest):
        ctx.release_turn()
        max_wait = min(max(0, getattr(req, "max_wait_ms", 0)), MAX_FETCH_WAIT_MS)
        response = await driver.fetch(src, raft_req, max_wait)
    else:
        response = await driver.handle_request(src, raft_req)
    return ErrorCode.NONE, response_to_wire(response)


@controller_handler(ApiKey.VOTE, min_version=0, max_version=1)
async def handle_vote(ctx: RequestContext, req: VoteRequest) -> VoteResponse:
    error, body = await _answer(ctx, ApiKey.VOTE, req)
    return body if isinstance(body, VoteResponse) else VoteResponse(error_code=error)


@controller_handler(ApiKey.BEGIN_QUORUM_EPOCH, min_version=0, max_version=1)
async def handle_begin_quorum_epoch(
    ctx: RequestContext, req: BeginQuorumEpochRequest
) -> BeginQuorumEpochResponse:
    error, body = await _answer(ctx, ApiKey.BEGIN_QUORUM_EPOCH, req)
    return (
        body
        if isinstance(body, BeginQuorumEpochResponse)
        else BeginQuorumEpochResponse(error_code=error)
    )


@controller_handler(ApiKey.END_QUORUM_EPOCH, min_version=0, max_version=1)
async def handle_end_quorum_epoch(
    ctx: RequestContext, req: EndQuorumEpochRequest
) -> EndQuorumEpochResponse:
    error, body = await _answer(ctx, ApiKey.END_QUORUM_EPOCH, req)
    return (
        body
        if isinstance(body, EndQuorumEpochResponse)
        else EndQuorumEpochResponse(error_code=error)
    )


@controller_handler(ApiKey.FETCH, min_version=12, max_version=17)
async def handle_metadata_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    """Followers' and observers' pulls of the metadata log (replica fetches of the quorum)."""
    error, body = await _answer(ctx, ApiKey.FETCH, req)
    if isinstance(body, FetchResponse):
        if ctx.api_version < 13:  # topic names, not ids, before v13
            for topic in body.responses:
                topic.topic = METADATA_TOPIC
        return body
    return FetchResponse(error_code=error)


@controller_handler(ApiKey.FETCH_SNAPSHOT, min_version=0, max_version=1)
async def handle_fetch_snapshot(
    ctx: RequestContext, req: FetchSnapshotRequest
) -> FetchSnapshotResponse:
    """A chunk of the leader's metadata snapshot for a fetcher below its log start."""
    error, body = await _answer(ctx, ApiKey.FETCH_SNAPSHOT, req)
    return (
        body if isinstance(body, FetchSnapshotResponse) else FetchSnapshotResponse(error_code=error)
    )


@controller_handler(ApiKey.DESCRIBE_QUORUM, min_version=0, max_version=2)
async def handle_describe_quorum(
    ctx: RequestContext, req: DescribeQuorumRequest
) -> DescribeQuorumResponse:
    """The quorum as its leader sees it: epoch, HW, each voter's and observer's log end and
    last fetch (wall-clock ms, as Kafka reports them); a non-leader says NOT_LEADER_OR_FOLLOWER."""
    driver = _driver(ctx)
    wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if wanted != [(METADATA_TOPIC, METADATA_PARTITION)]:
        return DescribeQuorumResponse(error_code=ErrorCode.INVALID_REQUEST)
    part = DescribeQuorumResponse.PartitionData(
        partition_index=METADATA_PARTITION,
        leader_id=driver.leader_id if driver.leader_id is not None else -1,
        leader_epoch=driver.epoch,
        high_watermark=driver.high_watermark,
    )
    if not driver.is_leader:
        part.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    else:
        wall_offset = time.time_ns() // 1_000_000 - loop_ms()
        for replica_id, progress in sorted(driver.replica_progress().items()):
            state = DescribeQuorumResponse.ReplicaState(
                replica_id=replica_id,
                log_end_offset=progress.end_offset,
                last_fetch_timestamp=-1
                if progress.last_fetch_ms is None
                else progress.last_fetch_ms + wall_offset,
                last_caught_up_timestamp=(
                    -1
                    if progress.last_caught_up_ms is None
                    else progress.last_caught_up_ms + wall_offset
                ),
            )
            (part.current_voters if replica_id in driver.voters else part.observers).append(state)
    return DescribeQuorumResponse(
        topics=[DescribeQuorumResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])]
    )
