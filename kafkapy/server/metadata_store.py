"""Topic metadata (names, ids, partition counts, config overrides) and the node's identity file.

Why a small JSON file and not a metadata log: a single node has one writer and a handful of
topics; rewriting the whole file atomically (write temp, fsync, rename, fsync dir) on each change
is simple and crash-safe - after a crash the file is either the old or the new version, never a
torn one. `meta.properties` mirrors Kafka's file of that name (cluster id, node id) so a data dir
cannot silently be reused by another node id.
"""

from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.server.config import ClusterConfig

__all__ = [
    "INTERNAL_TOPICS",
    "LEADER_EPOCH",
    "TOPICS_FILE_NAME",
    "MetaProperties",
    "TopicInfo",
    "TopicStore",
    "atomic_write",
    "cluster_id_for",
    "topic_name_error",
]

TOPICS_FILE_NAME = "kafkapy-topics.json"
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: a single node leads every partition of this table in this leader epoch
LEADER_EPOCH = 0
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

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(self.configs),
            "internal": self.internal,
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> TopicInfo:
        configs = obj.get("configs") or {}
        if not isinstance(configs, dict):
            raise ValueError("configs must be an object")
        partitions = obj["partitions"]
        if not isinstance(partitions, int) or partitions < 1:
            raise ValueError("partitions must be a positive integer")
        return cls(
            name=str(obj["name"]),
            topic_id=uuid.UUID(str(obj["topic_id"])),
            partitions=partitions,
            configs={str(k): str(v) for k, v in configs.items()},
            internal=bool(obj.get("internal", False)),
        )


class TopicStore:
    """The topic table, indexed by name and id, persisted to `path` (None: memory only); on a
    single node it also keeps the dynamic broker configs (`broker_configs`) and the group
    configs (`group_configs`), which a cluster keeps in the metadata log."""

    FORMAT_VERSION = 1

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        #: dynamic broker configs by resource name ("" = cluster default, else a node id)
        self.broker_configs: dict[str, dict[str, str]] = {}
        #: group configs (KIP-848) by group id
        self.group_configs: dict[str, dict[str, str]] = {}
        self.existed = False
        if path is not None and path.exists():
            self.existed = True
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("version") != self.FORMAT_VERSION:
                raise ValueError(f"{path}: unsupported topic metadata version {doc.get('version')}")
            for raw in doc.get("topics", []):
                self._index(TopicInfo.from_json(raw))
            for resource, values in doc.get("broker_configs", {}).items():
                self.broker_configs[str(resource)] = {str(k): str(v) for k, v in values.items()}
            for group, values in doc.get("group_configs", {}).items():
                self.group_configs[str(group)] = {str(k): str(v) for k, v in values.items()}

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

    def colliding(self, name: str) -> str | None:
        """An existing topic that differs from `name` only by '.' vs '_' (Kafka forbids both)."""
        norm = name.replace(".", "_")
        for other in self._by_name:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def put(self, info: TopicInfo) -> None:
        old = self._by_name.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            del self._by_id[old.topic_id]
        self._index(info)
        self.save()

    def set_broker_configs(self, resource: str, values: dict[str, str]) -> None:
        """Replace one resource's dynamic broker configs (empty: none left) and persist."""
        if values:
            self.broker_configs[resource] = dict(values)
        else:
            self.broker_configs.pop(resource, None)
        self.save()

    def set_group_configs(self, group_id: str, values: dict[str, str]) -> None:
        """Replace one group's configs (empty: none left) and persist."""
        if values:
            self.group_configs[group_id] = dict(values)
        else:
            self.group_configs.pop(group_id, None)
        self.save()

    def remove(self, name: str) -> TopicInfo | None:
        info = self._by_name.pop(name, None)
        if info is not None:
            del self._by_id[info.topic_id]
            self.save()
        return info

    def save(self) -> None:
        if self.path is None:
            return
        doc: dict[str, object] = {
            "version": self.FORMAT_VERSION, "topics": [t.to_json() for t in self.all()]}
        if self.broker_configs:
            doc["broker_configs"] = self.broker_configs
        if self.group_configs:
            doc["group_configs"] = self.group_configs
        atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode())


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
