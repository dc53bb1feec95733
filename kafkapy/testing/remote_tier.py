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

from kafkapy.protocol.records import Record, build_batch, build_control_batch
from kafkapy.storage import PartitionLog
from kafkapy.storage.remote.copier import LocalSegmentFiles, RemoteLogSegmentCopier
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata import RemoteLogMetadata, RemoteLogSegmentMetadata
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.object_store import ObjectStore

__all__ = ["append_sample", "copy_rolled_segments", "rolled_segment_files"]

SAMPLE_PRODUCER_ID = 7
SAMPLE_BASE_TS = 1_700_000_000_000


def append_sample(
    plog: PartitionLog, *, batches: int, records_per_batch: int = 4, value_bytes: int = 100,
    roll_every: int = 10, aborted_at: int | None = None, leader_epoch: int = 0,
) -> list[tuple[int, bytes]]:
    """Append `batches` plain batches (keyless records `b<i>-r<j>` padded to `value_bytes`,
    timestamps SAMPLE_BASE_TS + 10 i + j), rolling a segment after every `roll_every`; before
    batch `aborted_at` a transaction of two records is aborted (its batch, its ABORT marker
    and the transaction index entry, as the leader writes them). The high watermark moves to
    the end. Returns (offset, value) of every record a read_committed consumer sees."""
    committed: list[tuple[int, bytes]] = []
    for i in range(batches):
        if i == aborted_at:
            _append_aborted(plog, SAMPLE_BASE_TS + 10 * i, leader_epoch)
        values = [f"b{i}-r{j}-".encode().ljust(value_bytes, b"x") for j in range(records_per_batch)]
        records = [Record(j, j, None, v, []) for j, v in enumerate(values)]
        base = plog.append(build_batch(records, base_timestamp=SAMPLE_BASE_TS + 10 * i),
                           now_ms=SAMPLE_BASE_TS, leader_epoch=leader_epoch).base_offset
        committed.extend((base + j, v) for j, v in enumerate(values))
        if i % roll_every == roll_every - 1:
            plog.roll(SAMPLE_BASE_TS)
    plog.high_watermark = plog.log_end_offset
    plog.flush()
    return committed


def _append_aborted(plog: PartitionLog, ts: int, leader_epoch: int) -> None:
    records = [Record(j, 0, None, b"aborted-%d" % j, []) for j in range(2)]
    txn = build_batch(records, base_timestamp=ts, producer_id=SAMPLE_PRODUCER_ID, producer_epoch=0,
                      base_sequence=0, is_transactional=True)
    first = plog.append(txn, now_ms=SAMPLE_BASE_TS, leader_epoch=leader_epoch).base_offset
    marker = build_control_batch(False, producer_id=SAMPLE_PRODUCER_ID, producer_epoch=0,
                                 coordinator_epoch=0, timestamp_ms=ts)
    last = plog.append(marker, now_ms=SAMPLE_BASE_TS, from_client=False, leader_epoch=leader_epoch).base_offset
    plog.append_aborted_txn(SAMPLE_PRODUCER_ID, first, last, last + 1)


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
