"""`kafkapy transactions list|describe|abort` (kafka-transactions.sh).

- `list`: ListTransactions to every broker, since each answers for the transactional ids it
  coordinates.
- `describe --transactional-id ID`: DescribeTransactions to the id's transaction coordinator:
  state, producer id and epoch, timeout, start time and the partitions in the transaction.
- `abort`: ends a hanging transaction - one whose producer is gone while the coordinator lost
  track of it, so the partition's last stable offset stays put and read_committed consumers
  stall. As Kafka's tool does, it writes an abort marker (WriteTxnMarkers) to the partition's
  leader, for the producer that `--start-offset` names (found with DescribeProducers), or for
  the producer given by `--producer-id`, `--producer-epoch` and `--coordinator-epoch`.
"""

from __future__ import annotations

import time
from typing import Any

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    Output,
    check,
    client_options,
)
from kafkapy.cli.wire import TRANSACTION, Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

__all__ = ["transactions"]


@click.group(help=f"List, describe or abort transactions (kafka-transactions.sh). {KAFKA_COMPATIBLE}")
def transactions() -> None:
    pass


@transactions.command("list")
@client_options
def list_cmd(settings: ClientSettings) -> int:
    """Every transactional id the coordinators know, with its producer id and state."""
    rows: list[dict[str, Any]] = []
    with Admin(settings) as admin:
        admin.metadata([])
        for node_id in sorted(admin.brokers):
            r: ListTransactionsResponse = admin.broker(node_id).call(
                ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest())
            check(r.error_code, f"ListTransactions to broker {node_id}")
            rows += [{"transactional_id": t.transactional_id, "coordinator": node_id,
                      "producer_id": t.producer_id, "state": t.transaction_state}
                     for t in r.transaction_states]
    Output(settings).records([("transactional_id", "TRANSACTIONAL-ID"), ("coordinator", "COORDINATOR"),
                              ("producer_id", "PRODUCER-ID"), ("state", "TRANSACTION-STATE")],
                             sorted(rows, key=lambda r: r["transactional_id"]))
    return 0


@transactions.command()
@click.option("--transactional-id", required=True, help="the transactional id")
@client_options
def describe(settings: ClientSettings, transactional_id: str) -> int:
    """One transaction: state, producer, timeout, start and its partitions."""
    with Admin(settings) as admin:
        coordinator = admin.find_coordinator(transactional_id, TRANSACTION)
        r: DescribeTransactionsResponse = admin.broker(coordinator).call(
            ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    (t,) = r.transaction_states
    check(t.error_code, f"transactional id {transactional_id}")
    started = t.transaction_start_time_ms
    partitions = [f"{topic.topic}-{p}" for topic in t.topics for p in topic.partitions]
    row: dict[str, Any] = {
        "coordinator": coordinator, "transactional_id": t.transactional_id, "producer_id": t.producer_id,
        "producer_epoch": t.producer_epoch, "state": t.transaction_state,
        "timeout_ms": t.transaction_timeout_ms, "start_time_ms": None if started < 0 else started,
        "duration_ms": None if started < 0 else int(time.time() * 1000) - started,
        "partitions": partitions,
    }
    out = Output(settings)
    if settings.json:
        out.emit(row)
        return 0
    out.records([("coordinator", "COORDINATOR"), ("transactional_id", "TRANSACTIONAL-ID"),
                 ("producer_id", "PRODUCER-ID"), ("producer_epoch", "PRODUCER-EPOCH"),
                 ("state", "TRANSACTION-STATE"), ("timeout_ms", "TIMEOUT-MS"),
                 ("start_time_ms", "START-TIME-MS"), ("duration_ms", "DURATION-MS"),
                 ("partitions", "PARTITIONS")],
                [{**row, "partitions": ",".join(partitions) or "-"}])
    return 0


def _producer_at(admin: Admin, leader: int, topic: str, partition: int, start_offset: int) -> Any:
    """The active producer whose open transaction starts at `start_offset` (DescribeProducers)."""
    request = DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])])
    r: DescribeProducersResponse = admin.broker(leader).call(ApiKey.DESCRIBE_PRODUCERS, request)
    part = r.topics[0].partitions[0]
    check(part.error_code, f"DescribeProducers of {topic}-{partition}", part.error_message)
    for producer in part.active_producers:
        if producer.current_txn_start_offset == start_offset:
            return producer
    raise CliError(f"no open transaction of {topic}-{partition} starts at offset {start_offset}")


@transactions.command()
@click.option("--topic", required=True, help="the partition's topic")
@click.option("--partition", type=click.IntRange(min=0), required=True, help="the partition")
@click.option("--start-offset", type=click.IntRange(min=0), help="where the hanging transaction starts")
@click.option("--producer-id", type=int, help="instead of --start-offset: the producer id")
@click.option("--producer-epoch", type=int, help="with --producer-id: its epoch")
@click.option("--coordinator-epoch", type=int, help="with --producer-id: the coordinator epoch")
@client_options
def abort(settings: ClientSettings, topic: str, partition: int, start_offset: int | None,
          producer_id: int | None, producer_epoch: int | None, coordinator_epoch: int | None) -> int:
    """Write an abort marker for a hanging transaction on one partition."""
    explicit = (producer_id, producer_epoch, coordinator_epoch)
    by_offset = start_offset is not None and all(x is None for x in explicit)
    by_producer = start_offset is None and all(x is not None for x in explicit)
    if not (by_offset or by_producer):
        raise click.UsageError("pass --start-offset, or all of --producer-id, --producer-epoch "
                               "and --coordinator-epoch")
    with Admin(settings) as admin:
        leader = admin.leaders([topic]).get((topic, partition))
        if leader is None or leader < 0:
            raise CliError(f"{topic}-{partition}", ErrorCode.LEADER_NOT_AVAILABLE
                           if leader is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if start_offset is not None:
            p = _producer_at(admin, leader, topic, partition, start_offset)
            producer_id, producer_epoch, coordinator_epoch = p.producer_id, p.producer_epoch, p.coordinator_epoch
        assert producer_id is not None  # checked above
        assert producer_epoch is not None
        marker = WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            coordinator_epoch=max(coordinator_epoch or 0, 0),
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])
        r: WriteTxnMarkersResponse = admin.broker(leader).call(
            ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequest(markers=[marker]))
    for result in r.markers:
        for t in result.topics:
            for part in t.partitions:
                check(part.error_code, f"aborting producer {producer_id}'s transaction on {t.name}-{part.partition_index}")
    click.echo(f"aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on {topic}-{partition}")
    return 0
