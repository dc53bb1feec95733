"""kafkapy.storage: segmented, durable, recoverable partition logs (files only, no trio).

The public surface the server and replication code use; see `docs/architecture.md`
("Contract: storage") and the module docstrings for the on-disk layout and thread-safety rules.
"""

from kafkapy.storage.cleaner import CleanResult, clean_log
from kafkapy.storage.config import LogConfig
from kafkapy.storage.errors import (
    InconsistentTopicIdError,
    InvalidLogConfigError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
)
from kafkapy.storage.log import AppendResult, FileSlice, PartitionLog, ReadResult
from kafkapy.storage.manager import LogManager

__all__ = [
    "AppendResult",
    "CleanResult",
    "FileSlice",
    "InconsistentTopicIdError",
    "InvalidLogConfigError",
    "KafkaStorageError",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadResult",
    "RecordTooLargeError",
    "StorageError",
    "clean_log",
]
