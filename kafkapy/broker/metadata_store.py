"""The in-memory topic table (names, ids, partition counts, config overrides), topic names and
ids, and the node's identity file.

The topics themselves live in the metadata log (`__cluster_metadata-0`) for one node as for
many; `TopicStore` is the broker's index of the published image. `meta.properties` mirrors
Kafka's file of that name (cluster id, node id) so a data dir cannot silently be reused by
another node id; it and the producer id reservation are written with `atomic_write` (a crash
leaves the old or the new content, never a torn one).
"""

from __future__ import annotations

import base64
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.broker.config import ClusterConfig

__all__ = [
    "INTERNAL_TOPICS",
    "MetaProperties",
    "TopicInfo",
    "TopicStore",
    "atomic_write",
    "cluster_id_for",
    "topic_name_error",
]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a legal Kafka topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
    return None


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class TopicStore:
    """The topic table, indexed by name and id: this node's view of the topics in its published
    metadata image (`ReplicaManager.apply` keeps it in step), in memory only - the metadata log
    is what persists them."""

    def __init__(self) -> None:
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}

    def _index(self, info: TopicInfo) -> None:
        self._by_name[info.name] = info
        self._by_id[info.topic_id] = info

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicInfo]:
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def put(self, info: TopicInfo) -> None:
        old = self._by_name.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            del self._by_id[old.topic_id]
        self._index(info)

    def remove(self, name: str) -> TopicInfo | None:
        info = self._by_name.pop(name, None)
        if info is not None:
            del self._by_id[info.topic_id]
        return info


def new_topic_id() -> uuid.UUID:
    """A random topic id; Kafka reserves the all-zero UUID (and the one with only bit 0 set)."""
    while True:
        tid = uuid.uuid4()
        if tid.int > 1:
            return tid


def new_cluster_id() -> str:
    """Kafka's format: a random UUID as 22 URL-safe base64 characters."""
    return base64.urlsafe_b64encode(new_topic_id().bytes).decode().rstrip("=")


def cluster_id_for(config: ClusterConfig) -> str:
    """The cluster id every member derives from the voter set (Kafka's 22-character form).

    Why derived: members are started independently (no `kafka-storage format` step), yet clients
    expect one cluster id from every broker; the voter set is what they all share."""
    voters = ",".join(f"{i}@{a[0]}:{a[1]}" for i, a in sorted(config.voters.items()) if a is not None)
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkapy-cluster:{voters}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int

    @classmethod
    def load_or_create(cls, data_dir: Path, node_id: int) -> MetaProperties:
        """Read `meta.properties`, or write a fresh one; a node id mismatch is fatal (ValueError)."""
        path = data_dir / "meta.properties"
        if path.exists():
            values: dict[str, str] = {}
            for line in path.read_text(encoding="utf-8").splitlines():
                if line and not line.startswith("#") and "=" in line:
                    k, _, v = line.partition("=")
                    values[k.strip()] = v.strip()
            stored = int(values.get("node.id", values.get("broker.id", str(node_id))))
            if stored != node_id:
                raise ValueError(
                    f"{path} belongs to node.id={stored}, but this broker is node.id={node_id}"
                )
            cluster_id = values.get("cluster.id") or new_cluster_id()
            return cls(cluster_id, node_id)
        meta = cls(new_cluster_id(), node_id)
        text = f"#kafkapy\nversion=1\nnode.id={node_id}\ncluster.id={meta.cluster_id}\n"
        atomic_write(path, text.encode())
        return meta
