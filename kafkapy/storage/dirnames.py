"""Names of partition directories in a data dir: live logs, and logs being deleted or moved.

A live log is `<topic>-<partition>`. Deleting one renames it to
`<topic>-<partition>.<32 hex>-delete` first (atomic, so a crash never leaves half a partition),
and a move between data dirs copies into `...-future`. With Kafka's longest topic name (249
characters) those suffixes would exceed the 255-byte file name limit of every common file
system, the rename would fail, and a deleted topic would stay on disk. Kafka's rule (`LocalLog`'s
capped delete / future dir names) keeps the suffix whole and shortens the topic part until the
name fits; the unique id is what keeps two such names apart, the topic part is only for people
reading the directory.

At start-up every name ending in `-delete` or `-future` that has the shape above (capped or not,
so names written before the cap are still removed) is an unfinished delete or move.
"""

from __future__ import annotations

import re
import uuid

__all__ = [
    "DELETE_SUFFIX",
    "FUTURE_SUFFIX",
    "MAX_NAME_BYTES",
    "delete_dir_name",
    "future_dir_name",
    "is_unfinished_dir_name",
    "log_dir_name",
    "parse_log_dir_name",
    "valid_topic_name",
]

MAX_NAME_BYTES = 255
"""File name limit of ext4, xfs, btrfs and tmpfs (NAME_MAX)."""
DELETE_SUFFIX = "-delete"
FUTURE_SUFFIX = "-future"  # a replica being copied to another data dir (AlterReplicaLogDirs)
_TOPIC_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_UNFINISHED_RE = re.compile(r"^[A-Za-z0-9._-]+-\d+\.[0-9A-Za-z]+-(delete|future)$")


def valid_topic_name(topic: str) -> bool:
    """Kafka's legal topic names (at most 249 characters of [A-Za-z0-9._-], not "." or ".."),
    which also keeps every name here ASCII: characters are bytes."""
    return _TOPIC_RE.match(topic) is not None and topic not in (".", "..")


def log_dir_name(topic: str, partition: int) -> str:
    """The directory of a live log."""
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a live log's directory name, or None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not _TOPIC_RE.match(topic):
        return None
    return topic, int(part)


def delete_dir_name(topic: str, partition: int) -> str:
    """A fresh, unique name for a log about to be removed; at most `MAX_NAME_BYTES` bytes."""
    return _capped(topic, partition, DELETE_SUFFIX)


def future_dir_name(topic: str, partition: int) -> str:
    """A fresh, unique name for a copy in progress to another data dir; at most
    `MAX_NAME_BYTES` bytes."""
    return _capped(topic, partition, FUTURE_SUFFIX)


def is_unfinished_dir_name(name: str) -> bool:
    """True for a delete or move that a crash interrupted (either name form)."""
    return _UNFINISHED_RE.match(name) is not None


def _capped(topic: str, partition: int, suffix: str) -> str:
    """Topic names are ASCII (`_TOPIC_RE`), so characters are bytes here."""
    tail = f"-{partition}.{uuid.uuid4().hex}{suffix}"
    return topic[: max(0, MAX_NAME_BYTES - len(tail))] + tail
