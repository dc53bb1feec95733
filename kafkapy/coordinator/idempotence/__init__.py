"""Idempotent-producer state of one partition: sequence checks, open transactions, snapshots.

Why a separate package from the transaction coordinator: this state lives with every partition
log (the broker keeps one `ProducerStateManager` per partition and feeds it batch headers on every
append), while the coordinator lives with `__transaction_state`. Both are plain state machines with
no files, sockets or clock of their own.
"""

from __future__ import annotations

from kafkapy.coordinator.idempotence.producer_state import (
    MAX_CACHED_BATCHES,
    AbortedTxn,
    AppendOrigin,
    BatchHeaderFields,
    BatchMetadata,
    CompletedTxn,
    ControlType,
    PendingAppend,
    ProducerBatch,
    ProducerDescription,
    ProducerSnapshot,
    ProducerStateEntry,
    ProducerStateError,
    ProducerStateManager,
    UpdateResult,
    in_sequence,
    increment_sequence,
)
from kafkapy.coordinator.idempotence.snapshot import (
    SNAPSHOT_VERSION,
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
)

__all__ = [
    "MAX_CACHED_BATCHES",
    "SNAPSHOT_VERSION",
    "AbortedTxn",
    "AppendOrigin",
    "BatchHeaderFields",
    "BatchMetadata",
    "CompletedTxn",
    "ControlType",
    "CorruptSnapshotError",
    "PendingAppend",
    "ProducerBatch",
    "ProducerDescription",
    "ProducerSnapshot",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "UpdateResult",
    "decode_snapshot",
    "encode_snapshot",
    "in_sequence",
    "increment_sequence",
]
