"""What the coordinator runtimes share about their internal topics (`__consumer_offsets` for
`group_driver`, `__transaction_state` for `txn_driver`).

Why shared: both keep a coordinator's durable state in a compacted topic of their own, so both
register the topic on first use, create its logs off the event loop, find (or lazily create) the
log of one partition, and rebuild the state at start by reading every batch of a log from its
start. Those steps are the same whatever the records mean; what a record means, and what a
failure answers, stays with each driver.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import trio

from kafkapy.protocol.records import BatchHeader, iter_batches
from kafkapy.server.broker import Broker
from kafkapy.server.metadata_store import TopicInfo, new_topic_id
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import StorageError

__all__ = [
    "create_internal_logs",
    "internal_partition_log",
    "log_batches",
    "register_internal_topic",
]

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20


def register_internal_topic(
    broker: Broker, name: str, partitions: int, configs: dict[str, str]
) -> TopicInfo:
    """Add the internal topic to the broker's metadata (its logs are made separately)."""
    info = TopicInfo(name, new_topic_id(), partitions, configs, internal=True)
    broker.topics.put(info)
    log.info("created topic %s with %d partitions", info.name, info.partitions)
    return info


async def create_internal_logs(broker: Broker, info: TopicInfo) -> None:
    """Create the topic's missing logs in a worker thread (dozens of fsyncing log creations
    would stall the event loop). Abandoned on shutdown: the thread then stops at the closed
    LogManager, and start-up creates whatever is still missing."""
    config = broker.log_config(info)

    def create_logs() -> None:
        try:
            for p in range(info.partitions):
                if broker.logs.get(info.name, p) is None:
                    broker.logs.get_or_create(info.name, p, config, info.topic_id)
        except StorageError as exc:  # e.g. closed by shutdown
            log.warning("creating %s logs stopped: %s", info.name, exc)

    await trio.to_thread.run_sync(create_logs, abandon_on_cancel=True)


def internal_partition_log(broker: Broker, topic: str, partition: int) -> PartitionLog | None:
    """The partition's log, created now if the topic has the partition but the worker thread
    of `create_internal_logs` has not got to it yet; None if the partition does not exist."""
    plog = broker.partition_log(topic, partition)
    if plog is None:
        info = broker.topics.get(topic)
        if info is None or partition >= info.partitions:
            return None
        plog = broker.logs.get_or_create(info.name, partition, broker.log_config(info),
                                         info.topic_id)
    return plog


def log_batches(plog: PartitionLog) -> Iterator[tuple[bytes, int, BatchHeader]]:
    """(chunk, position, header) of every batch from the log start to the log end as they
    were at the call, read a chunk at a time (the load/replay path of a coordinator).

    A chunk that does not parse raises `ProtocolError` from the iteration, after the batches
    before it were yielded; the caller decides whether that ends the load.
    """
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        data = plog.read_bytes(offset, _READ_CHUNK)
        progressed = False
        for pos, header in iter_batches(data):
            progressed = True
            offset = header.last_offset + 1
            yield data, pos, header
        if not progressed:
            break
