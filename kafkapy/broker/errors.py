"""The server's domain errors: `BrokerError` (a failure a handler answers with its Kafka error
code) and `storage_failure` (the code for a log-store failure, logged when the store itself
failed). In a module of their own so every server part - the broker, the partition facade, the
handlers - can raise and map them without importing the `Broker`."""

from __future__ import annotations

import logging

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.errors import StorageError

__all__ = ["BrokerError", "storage_failure"]

log = logging.getLogger("kafkapy.server.broker")


class BrokerError(Exception):
    """A domain failure a handler turns into `error_code` (+ `message` where the API has one)."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message


def storage_failure(exc: StorageError, what: str) -> ErrorCode:
    """The code to answer a request that failed in the log store with, logging why when the
    store itself failed (a disk error, too many open files: KAFKA_STORAGE_ERROR or an unexpected
    error), so an operator sees the cause and not only the client its bare error code. Failures
    the request caused (MESSAGE_TOO_LARGE, OFFSET_OUT_OF_RANGE, ...) are the client's to see."""
    if exc.error_code in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR):
        log.warning("%s failed in the log store: %s: %s", what, type(exc).__name__, exc)
    return exc.error_code
