"""The broker's domain errors: `BrokerError` (a failure a handler answers with its Kafka error
code), `storage_failure` (the code for a log-store failure, logged when the store itself
failed), `PeerError` (a request to another node failed) and `NotControllerError` (this node is
not the active controller). In a module of their own so every server part - the broker, the partition facade, the
handlers - can raise and map them without importing the `Broker`."""

from __future__ import annotations

import logging

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.errors import StorageError

__all__ = ["BrokerError", "NotControllerError", "PeerError", "storage_failure"]

log = logging.getLogger("kafkapy.server.broker")


class BrokerError(Exception):
    """A domain failure a handler turns into `error_code` (+ `message` where the API has one)."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message

class PeerError(Exception):
    """A request to another node failed (no connection, closed, timed out, undecodable).

    `gone`: the failure is a sign that the peer's process is not there any more - the
    connection was refused, reset or closed by the other side - as opposed to a timeout, which
    a slow or paused process causes as well (see `PeerPool.on_gone`).
    `refused`: a new connection was refused - nothing listens on the peer's port, the strongest
    of these signs (a live process may still close or reset a connection; it never refuses)."""

    def __init__(self, message: str, *, gone: bool = False, refused: bool = False) -> None:
        super().__init__(message)
        self.gone = gone or refused
        self.refused = refused



class NotControllerError(Exception):
    """This node is not (or no longer) the active controller: answer NOT_CONTROLLER."""


def storage_failure(exc: StorageError, what: str) -> ErrorCode:
    """The code to answer a request that failed in the log store with, logging why when the
    store itself failed (a disk error, too many open files: KAFKA_STORAGE_ERROR or an unexpected
    error), so an operator sees the cause and not only the client its bare error code. Failures
    the request caused (MESSAGE_TOO_LARGE, OFFSET_OUT_OF_RANGE, ...) are the client's to see."""
    if exc.error_code in (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR):
        log.warning("%s failed in the log store: %s: %s", what, type(exc).__name__, exc)
    return exc.error_code
