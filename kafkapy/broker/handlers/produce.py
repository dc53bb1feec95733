"""Produce (key 0): v0-11 advertised; record batches must be magic v2.

Why v0-2 are advertised although magic 0/1 message sets are refused: librdkafka up to 2.11
(Debian's kcat) enables gzip/snappy/lz4 only if the broker lists Produce v0, and silently sends
uncompressed data otherwise. A real v0-2 request gets UNSUPPORTED_VERSION on every partition
(its message sets are magic 0/1).

Behaviour: acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS on every partition); on one node
acks=-1 is acks=1, since the leader alone is the ISR (min.insync.replicas=1). Each partition's
batches go to `PartitionLog.append` as the bytes they arrived in - validated per batch (CRC,
counts, size) and by one walk over each batch's record bytes, never decoded - which assigns offsets and overwrites the partition leader epoch
with the leader's (0); LogAppendTime topics get the broker's clock. The high watermark moves to
the log end offset at once and long-poll fetches on the partition wake up. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (bad name or an internal topic),
CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, KAFKA_STORAGE_ERROR.
Record-level rules (malformed records: CORRUPT_MESSAGE; keyless records on compacted topics,
`message.timestamp.(before|after).max.ms`, the max timestamp recomputed from the records) are
`storage.validator`'s; a refused batch names its records in `record_errors` (v8+). Unknown topics are
auto-created when `auto.create.topics.enable`. acks=0 sends no response - and, as in Kafka, a
failed acks=0 produce closes the connection, the only way the client can notice.

Fault hook (tests only): `kafkapy.test.fault.drop.after.produce.append=N` closes the connection
instead of answering the N-th successful append.

Idempotent producers (batches with a producer id): the partition's producer state checks epochs
and sequences before the append (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
UNKNOWN_PRODUCER_ID) and a retried batch is answered with its original offset without being
written again.

Transactional batches: before the append the transaction coordinator must confirm that the
partition is in the producer's ongoing transaction (KIP-890 part 1 verification, on every
transactional write; the coordinator is local, so it costs a lookup); otherwise
INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING or INVALID_PRODUCER_EPOCH (fenced) and nothing is
written. This is what keeps a delayed write of a finished transaction out of a later one.

Cluster mode (docs/cluster.md): only the partition's leader
takes writes (else NOT_LEADER_OR_FOLLOWER) and stamps its leader epoch on the batches. acks=-1
first checks the committed ISR against `min.insync.replicas` (NOT_ENOUGH_REPLICAS, nothing
written), appends, then waits - turn released - until the HW passes the batches or `timeout_ms`
(REQUEST_TIMED_OUT; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank under the minimum,
NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile); acks=1 answers after the local append.
A leader whose lease ran out (no unfenced heartbeat answer for a session timeout: it may have
been fenced and replaced, `kafkapy.leader.lease.enable`) answers NOT_LEADER_OR_FOLLOWER.
Unknown topics are auto-created through the controller; the write goes ahead when the topic is
published here by the time the creation returns (a single node: always), else it is answered
UNKNOWN_TOPIC_OR_PARTITION this time (the client retries once its metadata shows the leader).

Where the rules live: the leader lookup, the write checks, idempotence, the KIP-890 check, the
append and the HW wait are the partition facade's (`ctx.partitions`,
kafkapy.broker.partitions); this module maps the request onto it and its results onto the answer.

Authorization (an authorizer configured; Kafka's checks): transactional batches need WRITE on
the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), each topic
WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions), and an unknown topic is auto-created
only for a principal that may CREATE it (else UNKNOWN_TOPIC_OR_PARTITION). Idempotent writes need
nothing more here: InitProducerId checked IDEMPOTENT_WRITE (KIP-679). Without an authorizer the
request pays one attribute test.

Quotas (`producer_byte_rate`, kafkapy.quota): with a quota configured for the client, the
request's record bytes are counted against it after the append; over the quota the response
carries `throttle_time_ms` and the connection reads nothing more from the client for that long
(KIP-219; the connection delays the response itself for v0-5, which predate client-side
throttling). With no producer quota configured anywhere the only cost is one set lookup.

Not yet: Produce v12 (transactions v2's implicit add).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.clock import now_ms, quota_ms
from kafkapy.broker.context import CloseConnection, RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.metadata_store import INTERNAL_TOPICS
from kafkapy.broker.partitions import Appended, LeaderPartition
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse
from kafkapy.protocol.messages.produce import (
    ProduceRequest_TopicProduceData as TopicData,
)
from kafkapy.protocol.messages.produce import (
    ProduceResponse_PartitionProduceResponse as PartitionResponse,
)
from kafkapy.quota.client_quotas import PRODUCER_BYTE_RATE

__all__ = ["handle_produce"]

_NONE = ErrorCode.NONE  # per partition: a module global reads faster than the enum's attribute


def _error(index: int, code: ErrorCode, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, error_message=message)


def produce_error_response(req: ProduceRequest, version: int, code: ErrorCode) -> ProduceResponse | None:
    if req.acks == 0:
        return None
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=t.name, partition_responses=[_error(p.index, code) for p in t.partition_data]
            )
            for t in req.topic_data
        ]
    )


_TRANSACTIONAL_FLAG = 0x10  # batch attributes bit 4
_ATTRIBUTES_AT = 21  # offset of a batch header's int16 attributes


def _has_transactional_batches(req: ProduceRequest) -> bool:
    """Kafka's `hasTransactionalRecords`: the first batch of some partition is transactional."""
    for topic in req.topic_data:
        for part in topic.partition_data:
            records = part.records
            low = _ATTRIBUTES_AT + 1  # the attributes' low byte (big-endian int16)
            if records is not None and len(records) > low and records[low] & _TRANSACTIONAL_FLAG:
                return True
    return False


def _authorize(
    ctx: RequestContext, req: ProduceRequest, response: ProduceResponse
) -> list[TopicData] | None:
    """The topics the principal may write to; the others are answered in `response` already.
    None: the whole request is refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    if req.transactional_id is not None or _has_transactional_batches(req):
        tid = req.transactional_id
        if tid is None or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return None
    denied = ctx.unauthorized(AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data))
    topics = ctx.topics
    allowed = []
    for topic in req.topic_data:
        if topic.name in denied:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topics.get(topic.name) is None and not ctx.may_create_topic(topic.name):
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            allowed.append(topic)
            continue
        response.responses.append(ProduceResponse.TopicProduceResponse(
            name=topic.name, partition_responses=[_error(p.index, code) for p in topic.partition_data]
        ))
    return allowed


def _refusal(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    """The whole request's error answer when its acks or version cannot be served (None: go on);
    raises CloseConnection where the client reads no answer."""
    if req.acks not in (0, 1, -1):
        return produce_error_response(req, ctx.api_version, ErrorCode.INVALID_REQUIRED_ACKS)
    if ctx.api_version < 3:
        if req.acks == 0:
            raise CloseConnection("magic v0/v1 message sets are not supported")
        return produce_error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    return None


def _writable(ctx: RequestContext, req: ProduceRequest, response: ProduceResponse) -> list[TopicData] | None:
    """The topics to append to (all without an authorizer); None: the transactional id is not
    authorized (acks=0 has no answer to carry that, so the connection closes)."""
    if ctx.authorizer is None:
        return req.topic_data
    authorized = _authorize(ctx, req, response)
    if authorized is None and req.acks == 0:
        raise CloseConnection("produce refused: transactional id not authorized")
    return authorized


def _refused_append(index: int, done: Appended) -> PartitionResponse:
    """A partition's answer when its append was refused (KIP-467: the records at fault)."""
    refused = _error(index, done.error, done.message)
    if done.record_errors:
        refused.record_errors = [
            ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
            for i, m in done.record_errors
        ]
    return refused


async def _finish(
    ctx: RequestContext, req: ProduceRequest, response: ProduceResponse, flush: list[tuple[str, int]],
    replicated: list[tuple[str, PartitionResponse, int]], drop: bool,
) -> ProduceResponse | None:
    """After the appends: flush (flush.messages), wait for the ISR (acks=-1), throttle, and
    answer - or close the connection where acks=0 cannot carry an error."""
    partitions = ctx.partitions
    if flush:
        ctx.release_turn()
        await partitions.flush(flush)
    if replicated:
        ctx.release_turn()
        codes = await partitions.wait_replicated(
            [(name, answer.index, end) for name, answer, end in replicated], req.timeout_ms
        )
        for (_, answer, _), code in zip(replicated, codes, strict=True):
            if code is not ErrorCode.NONE:
                answer.error_code = code
    if ctx.quotas.enabled(PRODUCER_BYTE_RATE):
        response.throttle_time_ms = _throttle(ctx, req)
    if drop:
        raise CloseConnection("test fault: drop after produce append")
    if req.acks == 0:
        if any(p.error_code for t in response.responses for p in t.partition_responses):
            # the client reads no answer, so Kafka signals the failure by closing
            raise CloseConnection("acks=0 produce failed on some partition")
        return None
    return response


@handler(ApiKey.PRODUCE, min_version=0, max_version=11, error_response=produce_error_response)
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    ports = ctx.ports
    response = ProduceResponse()
    refusal = _refusal(ctx, req)
    if refusal is not None:
        return refusal
    flush: list[tuple[str, int]] = []
    drop = False
    replicated: list[tuple[str, PartitionResponse, int]] = []  # acks=-1: wait for the HW
    # Per request, not per partition: the bound methods are looked up once, and one clock
    # reading per topic (after its awaits) stamps its partitions' appends (what a LogAppendTime
    # topic records) - a 1,000-partition request runs the inner loop 1,000 times.
    partitions = ports.partitions
    leader = partitions.leader
    append = partitions.append
    faults = ports.fault_injector
    acks = req.acks
    transactional_id = req.transactional_id
    topic_data = _writable(ctx, req, response)
    if topic_data is None:
        return produce_error_response(req, ctx.api_version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    for topic in topic_data:
        out = ProduceResponse.TopicProduceResponse(name=topic.name)
        response.responses.append(out)
        if topic.name in INTERNAL_TOPICS:
            topic_error = ErrorCode.INVALID_TOPIC_EXCEPTION
        else:
            topic_error = await partitions.writable_topic(topic.name)
        append_ms = now_ms()
        for part in topic.partition_data:
            if topic_error is not _NONE:
                out.partition_responses.append(_error(part.index, topic_error))
                continue
            lp = leader(topic.name, part.index)
            if not isinstance(lp, LeaderPartition):  # (not isinstance(lp, ErrorCode): an enum's is slower)
                out.partition_responses.append(_error(part.index, lp))
                continue
            if part.records is None or len(part.records) == 0:
                out.partition_responses.append(_error(part.index, ErrorCode.CORRUPT_MESSAGE, "no record batches"))
                continue
            done = await append(lp, part.records, required_acks=acks, transactional_id=transactional_id,
                                append_ms=append_ms)
            if done.error is not _NONE:
                out.partition_responses.append(_refused_append(part.index, done))
                continue
            if done.flush_needed:
                flush.append((topic.name, part.index))
            if not done.duplicate:
                drop = drop or (faults is not None and faults.on_produce_append())
            answer = PartitionResponse(
                index=part.index,
                error_code=_NONE,
                base_offset=done.base_offset,
                log_append_time_ms=done.log_append_time_ms,
                log_start_offset=done.log_start_offset,
            )
            out.partition_responses.append(answer)
            if acks == -1 and not done.committed:
                replicated.append((topic.name, answer, done.end_offset))
    return await _finish(ctx, req, response, flush, replicated, drop)


def _throttle(ctx: RequestContext, req: ProduceRequest) -> int:
    """Count the request's record bytes against the client's producer quota; the throttle time
    (also left in `ctx.throttle_ms` for the connection)."""
    size = sum(len(p.records) for t in req.topic_data for p in t.partition_data if p.records is not None)
    throttle = ctx.quotas.record(PRODUCER_BYTE_RATE, ctx.user, ctx.header.client_id or "", size, quota_ms())
    ctx.throttle_ms = max(ctx.throttle_ms, throttle)
    return throttle
