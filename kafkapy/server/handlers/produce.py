"""Produce (key 0): v0-11 advertised; record batches must be magic v2.

Why v0-2 are advertised although magic 0/1 message sets are refused: librdkafka up to 2.11
(Debian's kcat) enables gzip/snappy/lz4 only if the broker lists Produce v0, and silently sends
uncompressed data otherwise. A real v0-2 request gets UNSUPPORTED_VERSION on every partition
(its message sets are magic 0/1).

Behaviour: acks must be 0, 1 or -1 (else INVALID_REQUIRED_ACKS on every partition); on one node
acks=-1 is acks=1, since the leader alone is the ISR (min.insync.replicas=1). Each partition's
batches go to `PartitionLog.append` as the bytes they arrived in - validation is per batch (CRC,
counts, size), never per record - which assigns offsets and overwrites the partition leader epoch
with the leader's (0); LogAppendTime topics get the broker's clock. The high watermark moves to
the log end offset at once and long-poll fetches on the partition wake up. Per-partition errors:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (bad name or an internal topic),
CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE, KAFKA_STORAGE_ERROR.
Record-level rules (keyless records on compacted topics, `message.timestamp.(before|after).max.ms`,
the max timestamp recomputed where the header cannot be trusted) are `storage.validator`'s; a
refused batch names its records in `record_errors` (v8+). Unknown topics are
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

Cluster mode (docs/cluster.md; single-node behaviour is unchanged): only the partition's leader
takes writes (else NOT_LEADER_OR_FOLLOWER) and stamps its leader epoch on the batches. acks=-1
first checks the committed ISR against `min.insync.replicas` (NOT_ENOUGH_REPLICAS, nothing
written), appends, then waits - turn released - until the HW passes the batches or `timeout_ms`
(REQUEST_TIMED_OUT; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank under the minimum,
NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile); acks=1 answers after the local append.
A leader whose lease ran out (no unfenced heartbeat answer for a session timeout: it may have
been fenced and replaced, `kafkapy.leader.lease.enable`) answers NOT_LEADER_OR_FOLLOWER.
Unknown topics are auto-created through the controller and answered UNKNOWN_TOPIC_OR_PARTITION
this time (the client retries once its metadata shows the leader).

Not yet: quotas, Produce v12 (transactions v2's
implicit add).
"""

from __future__ import annotations

import logging
import struct
import time

import trio

from kafkapy.coordinator.idempotence import BatchMetadata, ProducerBatch
from kafkapy.coordinator.txn import TopicPartition
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    RecordValidationError,
)
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse
from kafkapy.protocol.messages.produce import (
    ProduceResponse_PartitionProduceResponse as PartitionResponse,
)
from kafkapy.protocol.records import BatchHeader, iter_batches
from kafkapy.server.broker import LEADER_EPOCH, Broker, BrokerError, now_ms, storage_failure
from kafkapy.server.context import CloseConnection, RequestContext
from kafkapy.server.handlers.metadata import auto_create_in_cluster
from kafkapy.server.handlers.registry import handler
from kafkapy.server.metadata_store import INTERNAL_TOPICS
from kafkapy.storage.errors import KafkaStorageError, StorageError

__all__ = ["handle_produce"]

log = logging.getLogger(__name__)

# Record batch v2 layout: batchLength (int32) at byte 8, producerId (int64) at byte 43, header
# 61 bytes, a batch spans batchLength + 12 bytes. Read directly by `_producer_batches`' one-batch
# fast path (see there).
_BATCH_LENGTH = struct.Struct(">i")
_PRODUCER_ID = struct.Struct(">q")
_BATCH_LENGTH_AT = 8
_PRODUCER_ID_AT = 43
_BATCH_HEADER_BYTES = 61
_LOG_OVERHEAD = 12


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


async def _topic_error(broker: Broker, name: str) -> ErrorCode | None:
    if name in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if broker.replicas is not None:
        if broker.topics.get(name) is not None:
            return None
        if broker.auto_create_allowed():
            await auto_create_in_cluster(broker, name)
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if await broker.wait_until_created(name) is not None:
        return None
    if broker.auto_create_allowed():
        try:
            await broker.auto_create(name)
            return None
        except BrokerError as e:
            return e.error_code
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@handler(ApiKey.PRODUCE, min_version=0, max_version=11, error_response=produce_error_response)
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    response = ProduceResponse()
    if req.acks not in (0, 1, -1):
        return produce_error_response(req, ctx.api_version, ErrorCode.INVALID_REQUIRED_ACKS)
    if ctx.api_version < 3:
        if req.acks == 0:
            raise CloseConnection("magic v0/v1 message sets are not supported")
        return produce_error_response(req, ctx.api_version, ErrorCode.UNSUPPORTED_VERSION)
    flush: list[tuple[str, int]] = []
    drop = False
    replicated: list[tuple[str, PartitionResponse, int]] = []  # cluster acks=-1: wait for the HW
    # Per request, not per partition: the broker's bound methods are looked up once, and one
    # clock reading per topic (after its awaits) stamps its partitions' appends (what a
    # LogAppendTime topic records) - a 1,000-partition request runs the inner loop 1,000 times.
    clustered = broker.replicas is not None
    wait_for_hw = clustered and req.acks == -1
    partition_log = broker.partition_log
    after_append = broker.after_append
    faults = broker.fault_injector
    produced = broker.stats.produced
    for topic in req.topic_data:
        out = ProduceResponse.TopicProduceResponse(name=topic.name)
        response.responses.append(out)
        topic_error = await _topic_error(broker, topic.name)
        append_ms = now_ms()
        for part in topic.partition_data:
            if topic_error is not None:
                out.partition_responses.append(_error(part.index, topic_error))
                continue
            plog = partition_log(topic.name, part.index)
            if plog is None:
                out.partition_responses.append(_error(part.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            if part.records is None or len(part.records) == 0:
                out.partition_responses.append(_error(part.index, ErrorCode.CORRUPT_MESSAGE, "no record batches"))
                continue
            leader_epoch = LEADER_EPOCH
            if clustered:
                code = _leader_check(broker, topic.name, part.index, req.acks)
                if isinstance(code, ErrorCode):
                    out.partition_responses.append(_error(part.index, code))
                    continue
                leader_epoch = code
            try:
                idempotent = _producer_batches(part.records)
                if idempotent:
                    txn = (
                        await broker.txn_coordinator.ready()
                        if any(h.is_transactional for h in idempotent) else None
                    )
                    mgr = await broker.producer_states.get((topic.name, part.index), plog)
                    if broker.partition_log(topic.name, part.index) is not plog:
                        raise KafkaStorageError("the partition was deleted meanwhile")
                    if broker.replicas is not None:  # leadership may have moved during the awaits
                        again = _leader_check(broker, topic.name, part.index, 0)
                        if isinstance(again, ErrorCode):
                            out.partition_responses.append(_error(part.index, again))
                            continue
                        leader_epoch = again
                    if txn is not None:
                        # KIP-890 part 1, checked after the last await so no marker can land
                        # between the check and the append
                        first = idempotent[0]
                        code = txn.verify(
                            req.transactional_id, first.producer_id, first.producer_epoch,
                            TopicPartition(topic.name, part.index),
                        )
                        if code is not ErrorCode.NONE:
                            out.partition_responses.append(_error(
                                part.index, code, "partition not in the producer's transaction"
                            ))
                            continue
                    # after the awaits above: the clock has moved since the request arrived
                    append_ms = now_ms()
                    pending = mgr.validate_append(_with_offsets(idempotent, plog.log_end_offset), append_ms)
                    if isinstance(pending, BatchMetadata):  # a retry of a written batch
                        retried = PartitionResponse(
                            index=part.index, error_code=ErrorCode.NONE, base_offset=pending.first_offset,
                            log_start_offset=plog.log_start_offset,
                        )
                        out.partition_responses.append(retried)
                        if wait_for_hw:
                            replicated.append((topic.name, retried, pending.last_offset + 1))
                        continue
                    # no await from validation to commit: nothing else can append in between
                    result = plog.append(part.records, now_ms=append_ms, leader_epoch=leader_epoch)
                    mgr.complete_append(pending)
                else:
                    result = plog.append(part.records, now_ms=append_ms, leader_epoch=leader_epoch)
            except RecordValidationError as e:
                refused = _error(part.index, e.error_code, e.reason)
                refused.record_errors = [
                    ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                    for i, m in e.record_errors
                ]
                out.partition_responses.append(refused)
                continue
            except ProtocolError as e:
                out.partition_responses.append(_error(part.index, e.error_code, str(e)))
                continue
            except StorageError as e:
                code = storage_failure(e, f"Produce to {topic.name}-{part.index}")
                out.partition_responses.append(_error(part.index, code, str(e)))
                continue
            after_append(topic.name, part.index, plog)
            produced(topic.name, len(part.records), result.last_offset - result.base_offset + 1)
            if result.flush_needed:
                flush.append((topic.name, part.index))
            drop = drop or (faults is not None and faults.on_produce_append())
            answer = PartitionResponse(
                index=part.index,
                error_code=ErrorCode.NONE,
                base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time_ms,
                log_start_offset=result.log_start_offset,
            )
            out.partition_responses.append(answer)
            if wait_for_hw:
                replicated.append((topic.name, answer, result.last_offset + 1))
    if flush:
        ctx.release_turn()
        await _flush(broker, flush)
    if replicated:
        ctx.release_turn()
        await _wait_replicated(broker, replicated, req.timeout_ms)
    if drop:
        raise CloseConnection("test fault: drop after produce append")
    if req.acks == 0:
        if any(p.error_code for t in response.responses for p in t.partition_responses):
            # the client reads no answer, so Kafka signals the failure by closing
            raise CloseConnection("acks=0 produce failed on some partition")
        return None
    return response


def _leader_check(broker: Broker, topic: str, partition: int, acks: int) -> ErrorCode | int:
    """Cluster mode: the leader epoch to stamp, or the error to answer with."""
    assert broker.replicas is not None
    role = broker.replicas.leader_role(topic, partition)
    if role is None or role.leader_state is None:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    lifecycle = broker.cluster.lifecycle if broker.cluster is not None else None
    if lifecycle is not None and not lifecycle.holds_lease():
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if acks == -1 and not role.leader_state.enough_replicas(broker.replicas.min_insync_replicas(topic)):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return role.leader_epoch


async def _wait_replicated(broker: Broker, waits: list[tuple[str, PartitionResponse, int]], timeout_ms: int) -> None:
    """acks=-1 in cluster mode: every appended partition waits for its HW, all within one
    `timeout_ms` (as Kafka's delayed produce); failures replace that partition's error code."""
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    for topic, answer, end in waits:
        left_ms = max(int((deadline - trio.current_time()) * 1000), 0)
        code = await broker.wait_replicated(topic, answer.index, end, left_ms)
        if code is not ErrorCode.NONE:
            answer.error_code = code


def _producer_batches(records: bytes | memoryview) -> list[BatchHeader]:
    """The batch headers when the batches carry a producer id (idempotent producer), else [].

    Per batch, never per record; malformed input is left for the log's own validation. Fast path
    for the common case of one batch without a producer id (what a non-idempotent client sends
    per partition): one read of its producerId field instead of parsing the header, which the
    log then parses again (a tenth of the handler's time with 1,000 one-batch partitions)."""
    size = len(records)
    if size >= _BATCH_HEADER_BYTES:
        (length,) = _BATCH_LENGTH.unpack_from(records, _BATCH_LENGTH_AT)
        if length + _LOG_OVERHEAD == size and _PRODUCER_ID.unpack_from(records, _PRODUCER_ID_AT)[0] < 0:
            return []
    try:
        headers = [h for _, h in iter_batches(records)]
    except ProtocolError:
        return []
    if not any(h.producer_id >= 0 for h in headers):
        return []
    for h in headers:
        if h.is_control:
            raise InvalidRecordError("clients may not produce control batches")
    return headers


def _with_offsets(headers: list[BatchHeader], next_offset: int) -> list[ProducerBatch]:
    """As the log will number them: consecutively from its end offset."""
    batches = []
    for h in headers:
        batches.append(ProducerBatch.from_header(h, base_offset=next_offset))
        next_offset += h.last_offset_delta + 1
    return batches


async def _flush(broker: Broker, partitions: list[tuple[str, int]]) -> None:
    """`flush.messages` asked for an fsync before the acknowledgement."""
    for topic, partition in partitions:
        plog = broker.partition_log(topic, partition)
        if plog is not None:
            try:
                started = time.perf_counter()
                await trio.to_thread.run_sync(plog.flush)
                broker.stats.log_flush_ms.observe((time.perf_counter() - started) * 1000)
            except StorageError:
                log.exception("flush of %s-%d failed", topic, partition)
