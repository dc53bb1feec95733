"""Transaction coordinator: transactional ids, their state machine and `__transaction_state`.

Plain state machines (no trio, files or clock): operations return records, responses and
marker-writing actions; `replay` applies records. See `coordinator.py` for the rules and
docs/transactions.md for the design and the server hooks.
"""

from __future__ import annotations

from kafkapy.coordinator.txn.coordinator import (
    OFFSETS_TOPIC,
    AddPartitionsTxn,
    CoordinatorResult,
    EndTxnResult,
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionCoordinator,
    TransactionDescription,
    TransactionListing,
    TxnLogRecord,
    WriteTxnMarkers,
)
from kafkapy.coordinator.txn.partitioning import java_string_hash, partition_for
from kafkapy.coordinator.txn.producer_ids import ProducerIdBlockAllocator
from kafkapy.coordinator.txn.records import TxnRecordError
from kafkapy.coordinator.txn.state import (
    VALID_PREVIOUS_STATES,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    check_transition,
)

__all__ = [
    "OFFSETS_TOPIC",
    "VALID_PREVIOUS_STATES",
    "AddPartitionsTxn",
    "CoordinatorResult",
    "EndTxnResult",
    "IllegalTransitionError",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "ProducerIdBlockAllocator",
    "TopicPartition",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionListing",
    "TransactionMetadata",
    "TxnLogRecord",
    "TxnRecordError",
    "TxnState",
    "WriteTxnMarkers",
    "check_transition",
    "java_string_hash",
    "partition_for",
]
