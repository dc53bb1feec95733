"""First start of a data dir written before every node kept its metadata in the Raft log.

Why: kafkapy's single node used to keep its topics (names, ids, partition counts, config
overrides) and the dynamic broker configs in `kafkapy-topics.json`, and reserved producer ids
in `kafkapy-producer-ids`. A node is now a KRaft-style cluster member even alone - a quorum of
one - whose topics live only in the metadata log (`__cluster_metadata-0`). So the first start
on such a data dir writes what the file says into the metadata log as the records the
controller would have written (`TopicRecord`, `ConfigRecord`, `PartitionRecord` with this node
as the only replica, leader and ISR at leader epoch 0, the epoch the single node wrote its
batches in; `ProducerIdsRecord` past every id the file reserved, so no new producer gets an id
an old one had), then renames the file to `kafkapy-topics.json.migrated` (kept, never deleted).
The partition directories, with their messages and the `__consumer_offsets` /
`__transaction_state` logs holding committed offsets and transactions, are used as they are.
A data dir with partition directories and no topics file (an older kafkapy wrote none) has them
adopted the same way, as the single node did, with the topic id and overrides stored in each
directory.

Only a quorum of one migrates, and only into an empty metadata log: a member of a larger
quorum takes its metadata from the leader, and a non-empty log means the migration is done (a
crash before the rename leaves the file; the next start only renames it).

How the entries commit: they are appended as entries of a Raft epoch above the persisted one
(the quorum state is written first, so the log never holds an epoch the state has not seen);
the sole voter then leads the next epoch at start-up, and its epoch's first entry commits
everything before it - the migrated records are the first thing the node's image applies.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kafkapy.controller.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    encode_record,
)
from kafkapy.raft import Entry, QuorumState
from kafkapy.server.cluster.metadata_log import (
    METADATA_TOPIC,
    MetadataLog,
    read_quorum_state,
    write_quorum_state,
)
from kafkapy.storage import LogManager

__all__ = [
    "MIGRATED_SUFFIX",
    "PRODUCER_IDS_FILE",
    "TOPICS_FILE",
    "LegacyTopic",
    "migrate_topics_file",
    "migration_records",
    "read_legacy_state",
]

log = logging.getLogger(__name__)

TOPICS_FILE = "kafkapy-topics.json"
PRODUCER_IDS_FILE = "kafkapy-producer-ids"
MIGRATED_SUFFIX = ".migrated"
_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class LegacyTopic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class LegacyState:
    """What a pre-metadata-log data dir says about its topics and configs."""

    topics: list[LegacyTopic] = field(default_factory=list)
    #: dynamic broker configs: "" (cluster default) or a node id -> {name: value}
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: group configs (KIP-848) by group id, which a single node kept in the same file
    group_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the first producer id the old single node had not reserved
    next_producer_id: int = 0


def read_legacy_state(data_dir: Path, logs: LogManager) -> LegacyState | None:
    """The state to migrate from `data_dir` (None: nothing to migrate). The topics file when it
    exists, else the partition directories found on disk (adopted as the single node did)."""
    path = data_dir / TOPICS_FILE
    state = LegacyState()
    if path.exists():
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("version") != _FORMAT_VERSION:
            raise ValueError(f"{path}: unsupported topic metadata version {doc.get('version')}")
        for raw in doc.get("topics", []):
            partitions = raw["partitions"]
            if not isinstance(partitions, int) or partitions < 1:
                raise ValueError(f"{path}: topic {raw.get('name')!r} has no valid partition count")
            configs = raw.get("configs") or {}
            state.topics.append(
                LegacyTopic(
                    str(raw["name"]),
                    uuid.UUID(str(raw["topic_id"])),
                    partitions,
                    {str(k): str(v) for k, v in configs.items()},
                )
            )
        for resource, values in (doc.get("broker_configs") or {}).items():
            state.broker_configs[str(resource)] = {str(k): str(v) for k, v in values.items()}
        for group, values in (doc.get("group_configs") or {}).items():
            state.group_configs[str(group)] = {str(k): str(v) for k, v in values.items()}
    else:
        on_disk: dict[str, list[int]] = {}
        for topic, partition in logs.logs():
            if topic != METADATA_TOPIC:
                on_disk.setdefault(topic, []).append(partition)
        for topic, parts in sorted(on_disk.items()):
            first = logs.get(topic, min(parts))
            topic_id = first.topic_id if first is not None and first.topic_id.int else uuid.uuid4()
            overrides = dict(first.config_overrides) if first is not None else {}
            state.topics.append(LegacyTopic(topic, topic_id, max(parts) + 1, overrides))
    ids = data_dir / PRODUCER_IDS_FILE
    if ids.exists():
        try:
            state.next_producer_id = int(ids.read_text(encoding="ascii").strip())
        except ValueError:
            raise ValueError(f"{ids} is damaged; remove it only if no producer is running") from None
    if not (state.topics or state.broker_configs or state.group_configs or state.next_producer_id):
        return None
    return state


def migration_records(state: LegacyState, node_id: int) -> list[MetadataRecord]:
    """The metadata records that make `state` this node's image (see the module doc)."""
    records: list[MetadataRecord] = []
    if state.next_producer_id > 0:
        records.append(ProducerIdsRecord(node_id, -1, state.next_producer_id))
    for resource, values in sorted(state.broker_configs.items()):
        for name, value in sorted(values.items()):
            records.append(ConfigRecord(ConfigResourceType.BROKER, resource, name, value))
    for group, values in sorted(state.group_configs.items()):
        for name, value in sorted(values.items()):
            records.append(ConfigRecord(ConfigResourceType.GROUP, group, name, value))
    for topic in sorted(state.topics, key=lambda t: t.name):
        records.append(TopicRecord(topic.name, topic.topic_id))
        for name, value in sorted(topic.configs.items()):
            records.append(ConfigRecord(ConfigResourceType.TOPIC, topic.name, name, value))
        for p in range(topic.partitions):
            records.append(PartitionRecord(p, topic.topic_id, (node_id,), (node_id,), node_id))
    return records


def migrate_topics_file(logs: LogManager, data_dir: Path, node_id: int) -> int:
    """Migrate `data_dir` into its (empty) metadata log on a quorum of one; the number of
    records written (0: nothing to do). Raises ValueError on a damaged topics file - the
    start stops rather than run without the topics it names."""
    path = data_dir / TOPICS_FILE
    metadata = MetadataLog.open(logs)
    if metadata.end_offset() > 0 or metadata.latest_snapshot() is not None:
        if path.exists():  # migrated, and the crash came before the rename
            path.replace(path.with_name(path.name + MIGRATED_SUFFIX))
        return 0
    state = read_legacy_state(data_dir, logs)
    if state is None:
        return 0
    records = migration_records(state, node_id)
    quorum = read_quorum_state(metadata.directory)
    epoch = quorum.epoch + 1
    write_quorum_state(metadata.directory, QuorumState(epoch))
    metadata.append([Entry(i, epoch, encode_record(r)) for i, r in enumerate(records)])
    metadata.flush()
    if path.exists():
        path.replace(path.with_name(path.name + MIGRATED_SUFFIX))
    log.info(
        "migrated %d topics and %d dynamic broker config sets into the metadata log (%d records)%s",
        len(state.topics),
        len(state.broker_configs),
        len(records),
        f"; {TOPICS_FILE} kept as {TOPICS_FILE}{MIGRATED_SUFFIX}" if path.with_name(path.name + MIGRATED_SUFFIX).exists() else "",
    )
    return len(records)
