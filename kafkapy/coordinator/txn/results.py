"""Values the transaction coordinator hands back: records, responses and marker actions.

Why separate types from the wire messages: the coordinator layer never sees request or response
classes (the server's handlers translate), so these stay small, immutable and easy to compare in
tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from kafkapy.coordinator.txn.state import TopicPartition
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "AddPartitionsTxn",
    "CoordinatorResult",
    "EndTxnResult",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "TransactionDescription",
    "TransactionListing",
    "TxnLogRecord",
    "WriteTxnMarkers",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TxnLogRecord:
    """One record for `__transaction_state` (`value` None is a tombstone)."""

    partition: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class WriteTxnMarkers:
    """Write a control batch to each partition, then call `complete_markers`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class CoordinatorResult(Generic[T]):
    records: tuple[TxnLogRecord, ...]
    response: T
    markers: tuple[WriteTxnMarkers, ...] = ()
    #: What to answer if appending `records` fails (the runtime maps storage errors further).
    error_on_write_failure: ErrorCode = ErrorCode.COORDINATOR_NOT_AVAILABLE


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    error: ErrorCode
    producer_id: int = -1  # v5+: the identity for the next transaction
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class AddPartitionsTxn:
    """One transaction of an AddPartitionsToTxn v4+ (broker) request."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    verify_only: bool = False


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    txn_timeout_ms: int = 0
    txn_start_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True, slots=True)
class ListTransactionsResult:
    unknown_state_filters: tuple[str, ...]
    transactions: tuple[TransactionListing, ...]
