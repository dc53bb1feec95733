"""kafkapy.storage: segmented, durable, recoverable partition logs (files only, no trio).

The public surface the server and replication code use; see `docs/architecture.md`
("Contract: storage") and the module docstrings for the on-disk layout and thread-safety rules.
"""

from kafkapy.storage.checkpoint import LeaderEpochCache
from kafkapy.storage.cleaner import CleanResult, Uncleanable, UncleanablePartitions, clean_log
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import (
    InconsistentTopicIdError,
    InvalidLogConfigError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    PartitionStorageError,
    RecordTooLargeError,
    StorageError,
)
from kafkapy.storage.log import PartitionLog
from kafkapy.storage.manager import LogManager
from kafkapy.storage.results import AppendResult, FileSlice, ReadResult
from kafkapy.storage.txn_index import AbortedTxnEntry

__all__ = [
    "AbortedTxnEntry",
    "AppendResult",
    "CleanResult",
    "FileSlice",
    "InconsistentTopicIdError",
    "InvalidLogConfigError",
    "KafkaStorageError",
    "LeaderEpochCache",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "PartitionStorageError",
    "ReadResult",
    "RecordTooLargeError",
    "StorageError",
    "Uncleanable",
    "UncleanablePartitions",
    "clean_log",
]
