"""Errors the log store raises, each carrying the Kafka error code a handler answers with.

Why separate from `kafkapy.protocol.errors`: these describe the state of the local log (a full
disk, an offset the log no longer holds, a batch over the topic's size limit), not malformed
bytes. Bad batches themselves are reported with the protocol layer's `CorruptRecordError` /
`InvalidRecordError`, so a handler maps every storage failure through one `.error_code` lookup.
"""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "InconsistentTopicIdError",
    "InvalidLogConfigError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "OffsetOutOfRangeError",
    "PartitionStorageError",
    "RecordTooLargeError",
    "StorageError",
]


class StorageError(Exception):
    """Base of every storage failure; `error_code` is what the request handler answers with."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RecordTooLargeError(StorageError):
    """A batch larger than the topic's `max.message.bytes`: MESSAGE_TOO_LARGE."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class KafkaStorageError(StorageError):
    """The disk failed us (full, I/O error, log taken offline): KAFKA_STORAGE_ERROR.

    Retriable from the client's point of view: another replica or a later attempt may succeed.
    """

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class PartitionStorageError(KafkaStorageError):
    """One partition's log failed on disk (created, opened at start-up, or deleted).

    Why its own type: a storage fault is isolated to its partition. The caller takes that
    partition offline (answering KAFKA_STORAGE_ERROR for it) and carries on with the others;
    `topic`, `partition` and `path` say which, `cause` (also `__cause__`) says why.
    """

    def __init__(self, topic: str, partition: int, path: Path, cause: BaseException) -> None:
        super().__init__(f"{topic}-{partition} ({path}): {cause}")
        self.topic = topic
        self.partition = partition
        self.path = path
        self.cause = cause
        self.__cause__ = cause


class LogDirNotFoundError(StorageError):
    """A path that is not one of the broker's data directories (`log.dirs`): LOG_DIR_NOT_FOUND."""

    error_code = ErrorCode.LOG_DIR_NOT_FOUND


class OffsetOutOfRangeError(StorageError):
    """An offset outside [log start offset, log end offset]: OFFSET_OUT_OF_RANGE."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, reason: str, *, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(reason)
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidLogConfigError(StorageError):
    """A topic config the log cannot honour (unknown name, unparsable value): INVALID_CONFIG."""

    error_code = ErrorCode.INVALID_CONFIG


class InconsistentTopicIdError(StorageError):
    """A partition directory already belongs to a topic with another id: INCONSISTENT_TOPIC_ID."""

    error_code = ErrorCode.INCONSISTENT_TOPIC_ID
