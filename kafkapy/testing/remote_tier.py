"""A partition's remote tier built from its own rolled segments, for tests and perf runs.

Why here and not in the broker: the leader's remote log manager is what copies segments in a
running cluster; tests of the read side and the remote-read benchmark need a remote tier of
known content without it, so they run the same copier (`storage.remote.copier`) over a real
`PartitionLog`'s rolled segments into a real S3 server, replay the published records into a
`RemoteLogMetadataStore` exactly as brokers replay `__remote_log_metadata`, and then move the
local log start past the copied segments, as local retention would.
"""

from __future__ import annotations

import uuid

from kafkapy.storage import PartitionLog
from kafkapy.storage.remote.copier import LocalSegmentFiles, RemoteLogSegmentCopier
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata import RemoteLogMetadata, RemoteLogSegmentMetadata
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.object_store import ObjectStore

__all__ = ["copy_rolled_segments", "rolled_segment_files"]


def rolled_segment_files(plog: PartitionLog) -> list[LocalSegmentFiles]:
    """The log's rolled (not active) segments as the copier takes them."""
    out = []
    for seg in plog.segments[:-1]:
        if seg.size == 0:
            continue
        out.append(LocalSegmentFiles.in_directory(
            plog.directory, seg.base_offset, end_offset=seg.next_offset - 1,
            max_timestamp_ms=seg.largest_timestamp(), leader_epochs=plog.leader_epochs.entries))
    return out


def copy_rolled_segments(
    plog: PartitionLog, topic: str, partition: int, store: ObjectStore, metadata: RemoteLogMetadataStore,
    *, broker_id: int = 0, leader_epoch: int = 0, now_ms: int = 0, up_to: int | None = None,
) -> list[RemoteLogSegmentMetadata]:
    """Copy every rolled segment (ending below `up_to` when given) and apply the metadata
    records to `metadata`; the copied segments' metadata, in offset order."""
    tp = TopicIdPartition(topic, plog.topic_id, partition)
    copier = RemoteLogSegmentCopier(store, broker_id)

    def publish(record: RemoteLogMetadata) -> None:
        metadata.apply(record)

    copied = []
    for files in rolled_segment_files(plog):
        if up_to is not None and files.end_offset >= up_to:
            break
        copied.append(copier.copy(tp, files, leader_epoch=leader_epoch, publish=publish, now_ms=now_ms,
                                  segment_uuid=uuid.uuid4()))
    return copied
