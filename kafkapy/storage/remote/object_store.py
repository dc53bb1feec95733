"""The object-store port of the remote tier: put, ranged get, list by prefix, delete.

Why a port and not boto3 everywhere: the remote tier's logic (which objects a copied segment
consists of, which byte range serves a fetch) is the same for every S3-compatible store and
must be testable without knowing the client library; `kafkapy.storage.remote.s3` is the one
implementation. Calls are synchronous and may block for seconds: the broker runs them on worker
threads, never on its event loop.

Keys are relative to the store's configured key prefix (`rsm.config.key.prefix`): an
implementation prepends it on the way in and strips it on the way out, so the layout
(`kafkapy.storage.remote.layout`) never sees it.

Error handling: every failure is one of the three errors below. `ObjectStoreUnavailableError`
is the one a caller retries (store down, timeout, throttled, 5xx): the copier backs off and
keeps the local segment, a remote fetch answers a retriable error. `ObjectNotFoundError` means
the store answered and the key is not there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.errors import StorageError

__all__ = [
    "ObjectInfo",
    "ObjectNotFoundError",
    "ObjectStore",
    "ObjectStoreError",
    "ObjectStoreUnavailableError",
]


class ObjectStoreError(StorageError):
    """The object store refused a request for good (denied, no such bucket, bad request)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = False


class ObjectStoreUnavailableError(ObjectStoreError):
    """The object store could not be reached or asked us to slow down: try again later."""

    retriable = True


class ObjectNotFoundError(ObjectStoreError):
    """The store answered, and the object is not there (deleted by retention, never copied)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no object {key!r}")
        self.key = key


@dataclasses.dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object: its key (relative to the store's prefix) and size in bytes."""

    key: str
    size: int


class ObjectStore(Protocol):
    """What the remote tier needs of an object store (see the module docstring for errors)."""

    def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing any object there."""

    def put_file(self, key: str, path: Path) -> None:
        """Store the whole file at `path` under `key` (streamed, not read into memory)."""

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the object (`end=None`: to its end); a range past the end is
        cut short, as HTTP ranges are."""

    def list(self, prefix: str) -> list[ObjectInfo]:
        """Every object whose key starts with `prefix`, in key order."""

    def delete(self, keys: Iterable[str]) -> None:
        """Remove the objects; a key that is already gone is not an error."""
