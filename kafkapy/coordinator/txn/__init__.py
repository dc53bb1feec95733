"""Transaction coordinator: transactional ids, their state machine and `__transaction_state`.

Plain state machines (no trio, files or clock): operations return records, responses and
marker-writing actions; `replay` applies records. See `coordinator.py` for the rules and
docs/transactions.md for the design and the server hooks.

Each name loads its submodule on first use (PEP 562): a broker starts without building the
coordinator's classes, which a first transactional request loads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.coordinator.txn.coordinator import (
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
    from kafkapy.coordinator.txn.partitioning import (
        OFFSETS_TOPIC,
        java_string_hash,
        partition_for,
    )
    from kafkapy.coordinator.txn.producer_ids import (
        ProducerIdBlockAllocator,
    )
    from kafkapy.coordinator.txn.records import (
        TxnRecordError,
    )
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

#: the submodule that defines each public name
_DEFINED_IN: dict[str, str] = {
    "OFFSETS_TOPIC": "partitioning",
    "AddPartitionsTxn": "coordinator",
    "CoordinatorResult": "coordinator",
    "EndTxnResult": "coordinator",
    "InitProducerIdResult": "coordinator",
    "ListTransactionsResult": "coordinator",
    "TransactionCoordinator": "coordinator",
    "TransactionDescription": "coordinator",
    "TransactionListing": "coordinator",
    "TxnLogRecord": "coordinator",
    "WriteTxnMarkers": "coordinator",
    "java_string_hash": "partitioning",
    "partition_for": "partitioning",
    "ProducerIdBlockAllocator": "producer_ids",
    "TxnRecordError": "records",
    "VALID_PREVIOUS_STATES": "state",
    "IllegalTransitionError": "state",
    "TopicPartition": "state",
    "TransactionMetadata": "state",
    "TxnState": "state",
    "check_transition": "state",
}


def __getattr__(name: str) -> object:
    """Import the submodule defining `name` (once: the value is then a module global)."""
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
