"""Transactions: InitProducerId (22) v0-5, AddPartitionsToTxn (24) v0-5, AddOffsetsToTxn (25)
v0-4, EndTxn (26) v0-5, WriteTxnMarkers (27) v0-1, DescribeTransactions (65) v0,
ListTransactions (66) v0-1.

Why thin: the rules live in `kafkapy.coordinator.txn.TransactionCoordinator` and its runtime in
`kafkapy.broker.txn_driver`; these handlers translate wire versions (docs/transactions.md,
section 4 item 7) and nothing else.

Behaviour:
- InitProducerId without a transactional id: a fresh producer id, epoch 0 (idempotent
  producers; `__transaction_state` is not touched). With one: the coordinator's answer (new id or
  epoch bump, an ongoing transaction of an older incarnation aborted - the caller gets
  CONCURRENT_TRANSACTIONS and retries). v3+ passes the producer id/epoch the client holds.
- AddPartitionsToTxn v0-3: the client's partitions join its transaction. A partition of an
  unknown topic answers UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, with
  nothing added (Kafka's rule). v4+ (broker form, KIP-890): several transactions, each with
  `verify_only` honoured; answered per transaction.
- AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction.
- EndTxn v0-4: transactions v1 (same epoch across transactions); v5+: transactions v2 (the
  epoch is bumped by every commit/abort and the answer carries the new producer id/epoch).
  Markers are written before the answer.
- WriteTxnMarkers: writes the listed markers (what a remote coordinator would send); answers
  per partition. The coordinator here uses the same path internally.
- DescribeTransactions / ListTransactions: read-only views of the coordinator.

A transactional id whose `__transaction_state` partition this broker does not
lead answers NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads); partitions are known
from the metadata image; producer ids come from controller blocks (COORDINATOR_LOAD_IN_PROGRESS
while none can be had); markers go to each partition's leader (`txn_markers.send_markers`).

Authorization (an authorizer configured; Kafka's checks): InitProducerId WRITE on the
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or, for an idempotent producer,
IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED);
AddPartitionsToTxn v0-3, AddOffsetsToTxn and EndTxn WRITE on the transactional id, plus WRITE per
topic (TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED) / READ on the group
(GROUP_AUTHORIZATION_FAILED); the brokers' AddPartitionsToTxn v4+ and WriteTxnMarkers
CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED); DescribeTransactions DESCRIBE per id,
ListTransactions lists the ids the principal may DESCRIBE.

Errors a failed `__transaction_state` write causes: the operation's `error_on_write_failure`
(COORDINATOR_NOT_AVAILABLE, so the client looks the coordinator up again and retries).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.clock import now_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.internal_topics import ensure_producer_ids, partition_exists
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.broker.txn_driver import TxnDriver
from kafkapy.broker.txn_markers import write_marker
from kafkapy.coordinator.txn import (
    AddPartitionsTxn,
    TopicPartition,
    TransactionCoordinator,
    TransactionDescription,
    TxnState,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkapy.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest_AddPartitionsToTxnTopic as TxnTopic,
)
from kafkapy.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult as TopicResult,
)

__all__ = [
    "handle_add_offsets_to_txn",
    "handle_add_partitions_to_txn",
    "handle_describe_transactions",
    "handle_end_txn",
    "handle_init_producer_id",
    "handle_list_transactions",
    "handle_write_txn_markers",
]

APT = AddPartitionsToTxnResponse
PartitionErrors = dict[TopicPartition, ErrorCode]


@handler(ApiKey.INIT_PRODUCER_ID, min_version=0, max_version=5)
async def handle_init_producer_id(
    ctx: RequestContext, req: InitProducerIdRequest
) -> InitProducerIdResponse:
    ports = ctx.ports
    refusal = _init_producer_id_refusal(ctx, req.transactional_id)
    if refusal is not None:
        return InitProducerIdResponse(error_code=refusal, producer_id=-1, producer_epoch=-1)
    # a transactional id may need two ids (a new one when its epoch is used up)
    unavailable = await ensure_producer_ids(ports.internal_topics, 1 if req.transactional_id is None else 2)
    if unavailable is not ErrorCode.NONE:
        return InitProducerIdResponse(error_code=unavailable, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is None:
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=ports.producer_ids.allocate(), producer_epoch=0
        )
    driver = await ports.transactions.ready()
    coordinator = driver.coordinator_for(req.transactional_id)
    if isinstance(coordinator, ErrorCode):
        return InitProducerIdResponse(error_code=coordinator, producer_id=-1, producer_epoch=-1)
    v3 = ctx.api_version >= 3
    outcome = await driver.run(coordinator.init_producer_id(
        req.transactional_id, req.transaction_timeout_ms, now_ms(),
        producer_id=req.producer_id if v3 else -1,
        producer_epoch=req.producer_epoch if v3 else -1,
    ), coordinator)
    if not outcome.written:
        return InitProducerIdResponse(error_code=outcome.error, producer_id=-1, producer_epoch=-1)
    r = outcome.response
    return InitProducerIdResponse(
        error_code=r.error, producer_id=r.producer_id, producer_epoch=r.producer_epoch
    )


def _may_write(ctx: RequestContext, transactional_id: str) -> bool:
    return ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _init_producer_id_refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    if transactional_id is not None:
        return None if _may_write(ctx, transactional_id) else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    authorizer = ctx.authorizer
    if authorizer is None or ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE):
        return None
    if authorizer.authorize_by_resource_type(
        ctx.principal, ctx.connection.host, AclOperation.WRITE, ResourceType.TOPIC
    ):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _add_partitions_refusal(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> PartitionErrors | None:
    """v0-3: the client's own transaction - WRITE on its id, then on every topic."""
    parts = _partitions(req.v3_and_below_topics)
    if not _may_write(ctx, req.v3_and_below_transactional_id):
        return dict.fromkeys(parts, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = ctx.unauthorized(AclOperation.WRITE, ResourceType.TOPIC, (tp.topic for tp in parts))
    if not denied:
        return None
    return {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
        for tp in parts
    }


def _partitions(topics: list[TxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def _unknown(ports: RequestPorts, parts: list[TopicPartition]) -> PartitionErrors | None:
    """Kafka's rule: any unknown partition -> it UNKNOWN_TOPIC_OR_PARTITION, the rest
    OPERATION_NOT_ATTEMPTED, nothing added."""
    missing = {tp for tp in parts if not partition_exists(ports.internal_topics, tp.topic, tp.partition)}
    if not missing:
        return None
    return {
        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
        else ErrorCode.OPERATION_NOT_ATTEMPTED
        for tp in parts
    }


def _topic_results(parts: list[TopicPartition], errors: PartitionErrors) -> list[TopicResult]:
    by_topic: dict[str, TopicResult] = {}
    for tp in parts:
        out = by_topic.setdefault(tp.topic, TopicResult(name=tp.topic))
        out.results_by_partition.append(APT.AddPartitionsToTxnPartitionResult(
            partition_index=tp.partition, partition_error_code=errors.get(tp, ErrorCode.NONE),
        ))
    return list(by_topic.values())


def add_partitions_error_response(
    req: AddPartitionsToTxnRequest, version: int, code: ErrorCode
) -> AddPartitionsToTxnResponse:
    if version >= 4:
        return AddPartitionsToTxnResponse(error_code=code)
    parts = _partitions(req.v3_and_below_topics)
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=_topic_results(parts, dict.fromkeys(parts, code))
    )


@handler(
    ApiKey.ADD_PARTITIONS_TO_TXN, min_version=0, max_version=5,
    error_response=add_partitions_error_response,
)
async def handle_add_partitions_to_txn(
    ctx: RequestContext, req: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse:
    ports = ctx.ports
    if ctx.api_version < 4:
        refused_v3 = _add_partitions_refusal(ctx, req)
        if refused_v3 is not None:
            return AddPartitionsToTxnResponse(
                results_by_topic_v3_and_below=_topic_results(_partitions(req.v3_and_below_topics), refused_v3)
            )
    elif not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    driver = await ports.transactions.ready()
    if ctx.api_version < 4:
        parts = _partitions(req.v3_and_below_topics)
        coordinator = driver.coordinator_for(req.v3_and_below_transactional_id)
        if isinstance(coordinator, ErrorCode):
            errors: PartitionErrors | None = dict.fromkeys(parts, coordinator)
        else:
            errors = _unknown(ports, parts)
        if errors is None:
            assert not isinstance(coordinator, ErrorCode)
            added = await driver.run(coordinator.add_partitions(
                req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch, parts, now_ms(),
            ), coordinator)
            errors = added.response if added.written else dict.fromkeys(parts, added.error)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(parts, errors))
    txns: list[AddPartitionsTxn] = []
    refused: dict[str, PartitionErrors] = {}
    wanted: dict[str, list[TopicPartition]] = {}
    for t in req.transactions:
        parts = _partitions(t.topics)
        wanted[t.transactional_id] = parts
        elsewhere = driver.coordinator_for(t.transactional_id)
        if isinstance(elsewhere, ErrorCode):
            refused[t.transactional_id] = dict.fromkeys(parts, elsewhere)
            continue
        unknown = _unknown(ports, parts)
        if unknown is not None:
            refused[t.transactional_id] = unknown
            continue
        txns.append(AddPartitionsTxn(
            t.transactional_id, t.producer_id, t.producer_epoch, tuple(parts), t.verify_only,
        ))
    results = await _add_batch_partitioned(driver, txns, wanted) | refused
    return AddPartitionsToTxnResponse(results_by_transaction=[
        APT.AddPartitionsToTxnResult(
            transactional_id=tid, topic_results=_topic_results(parts, results.get(tid, {})),
        )
        for tid, parts in wanted.items()
    ])


async def _add_batch_partitioned(
    driver: TxnDriver, txns: list[AddPartitionsTxn], wanted: dict[str, list[TopicPartition]]
) -> dict[str, PartitionErrors]:
    """The v4+ batch split by coordinator (each id's partition may have its own); a failed
    write answers its error for every partition of the ids it carried."""
    by_coordinator: dict[int, tuple[TransactionCoordinator, list[AddPartitionsTxn]]] = {}
    for t in txns:
        coordinator = driver.coordinator_for(t.transactional_id)
        assert not isinstance(coordinator, ErrorCode)  # checked by the caller, no await since
        by_coordinator.setdefault(id(coordinator), (coordinator, []))[1].append(t)
    results: dict[str, PartitionErrors] = {}
    for coordinator, batch in by_coordinator.values():
        outcome = await driver.run(coordinator.add_partitions_batch(batch, now_ms()), coordinator)
        if outcome.written:
            results.update(outcome.response)
        else:
            results.update({t.transactional_id: dict.fromkeys(wanted[t.transactional_id],
                                                              outcome.error) for t in batch})
    return results


@handler(ApiKey.ADD_OFFSETS_TO_TXN, min_version=0, max_version=4)
async def handle_add_offsets_to_txn(
    ctx: RequestContext, req: AddOffsetsToTxnRequest
) -> AddOffsetsToTxnResponse:
    if not _may_write(ctx, req.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ctx.transactions.ready()
    coordinator = driver.coordinator_for(req.transactional_id)
    if isinstance(coordinator, ErrorCode):
        return AddOffsetsToTxnResponse(error_code=coordinator)
    outcome = await driver.run(coordinator.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, req.group_id, now_ms(),
    ), coordinator)
    return AddOffsetsToTxnResponse(error_code=outcome.response if outcome.written else outcome.error)


@handler(ApiKey.END_TXN, min_version=0, max_version=5)
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    if not _may_write(ctx, req.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    driver = await ctx.transactions.ready()
    coordinator = driver.coordinator_for(req.transactional_id)
    if isinstance(coordinator, ErrorCode):
        return EndTxnResponse(error_code=coordinator)
    outcome = await driver.run(coordinator.end_txn(
        req.transactional_id, req.producer_id, req.producer_epoch, req.committed, now_ms(),
        transaction_version=2 if ctx.api_version >= 5 else 1,
    ), coordinator)
    if not outcome.written:
        return EndTxnResponse(error_code=outcome.error)
    r = outcome.response
    return EndTxnResponse(error_code=r.error, producer_id=r.producer_id, producer_epoch=r.producer_epoch)


@handler(ApiKey.WRITE_TXN_MARKERS, min_version=0, max_version=1)
async def handle_write_txn_markers(
    ctx: RequestContext, req: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    W = WriteTxnMarkersResponse
    allowed = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)
    ctx.release_turn()  # a marker waits for replication: the connection's next requests go on
    response = W()
    for marker in req.markers:
        out = W.WritableTxnMarkerResult(producer_id=marker.producer_id)
        response.markers.append(out)
        for t in marker.topics:
            topic = W.WritableTxnMarkerTopicResult(name=t.name)
            out.topics.append(topic)
            for p in t.partition_indexes:
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                    topic.partitions.append(W.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code))
                    continue
                code = await write_marker(
                    ctx.ports.internal_topics, TopicPartition(t.name, p), marker.producer_id,
                    marker.producer_epoch, marker.coordinator_epoch, marker.transaction_result,
                )
                topic.partitions.append(W.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code))
    return response


@handler(ApiKey.DESCRIBE_TRANSACTIONS, min_version=0, max_version=0)
async def handle_describe_transactions(
    ctx: RequestContext, req: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    D = DescribeTransactionsResponse
    driver = await ctx.transactions.ready()
    response = D()
    denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, req.transactional_ids)
    for d in _describe(driver, req.transactional_ids, denied):
        topics: dict[str, list[int]] = {}
        for tp in d.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        response.transaction_states.append(D.TransactionState(
            error_code=d.error, transactional_id=d.transactional_id, transaction_state=d.state,
            transaction_timeout_ms=d.txn_timeout_ms, transaction_start_time_ms=d.txn_start_timestamp,
            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=[D.TopicData(topic=name, partitions=ps) for name, ps in topics.items()],
        ))
    return response


@handler(ApiKey.LIST_TRANSACTIONS, min_version=0, max_version=1)
async def handle_list_transactions(
    ctx: RequestContext, req: ListTransactionsRequest
) -> ListTransactionsResponse:
    L = ListTransactionsResponse
    driver = await ctx.transactions.ready()
    now = now_ms()
    results = [
        coordinator.list_transactions(
            now, state_filters=req.state_filters, producer_id_filters=req.producer_id_filters,
            duration_filter_ms=req.duration_filter if ctx.api_version >= 1 else -1,
        )
        for coordinator in driver.coordinators()
    ]
    unknown = results[0].unknown_state_filters if results else tuple(
        s for s in req.state_filters if s not in _TXN_STATE_NAMES
    )
    hidden = ctx.unauthorized(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
        (t.transactional_id for result in results for t in result.transactions),
    )
    loading = bool(driver.owned.loading())
    return L(
        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE,
        unknown_state_filters=list(unknown),
        transaction_states=[
            L.TransactionState(
                transactional_id=t.transactional_id, producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for result in results
            for t in result.transactions
            if t.transactional_id not in hidden
        ],
    )


_TXN_STATE_NAMES = frozenset(s.value for s in TxnState)


def _describe(
    driver: TxnDriver, transactional_ids: list[str], denied: set[str]
) -> list[TransactionDescription]:
    """Each id from its coordinator, in request order (an id led elsewhere carries that; one
    the principal may not describe TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    out: list[TransactionDescription] = []
    for tid in transactional_ids:
        if tid in denied:
            out.append(TransactionDescription(tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        coordinator = driver.coordinator_for(tid)
        if isinstance(coordinator, ErrorCode):
            out.append(TransactionDescription(tid, coordinator))
        else:
            out.extend(coordinator.describe_transactions([tid]))
    return out
