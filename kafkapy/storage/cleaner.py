"""Log compaction (`cleanup.policy=compact`): keep the latest record per key, atomically.

What the cleaner guarantees (Kafka's rules, simplified where noted):
- Only non-active segments below the *first uncleanable offset* are cleaned: the active
  segment, anything at or past the last stable offset, and segments younger than
  `min.compaction.lag.ms` (by their largest timestamp) stay untouched.
- A run starts only when the dirty part (segments at or past `cleaner_offset`) is at least
  `min.cleanable.dirty.ratio` of the cleanable bytes.
- Offsets never change: a thinned batch is re-encoded with its original base offset, last
  offset delta, timestamps, producer fields and codec; a batch left whole is copied as bytes.
- Tombstones (null value) that are the latest for their key are dropped once their timestamp is
  older than `delete.retention.ms` (Kafka measures from when the tombstone was first cleaned;
  using the record timestamp is the simplification).
- Transactions: data of an *aborted* transaction is dropped once its abort marker lies in the
  cleanable range (the transaction is complete); data whose marker is not yet cleanable is kept
  untouched and never shadows other values; committed data is compacted like any other. Control
  batches are always kept (Kafka drops them later; not implemented). Records without a key are
  kept (Kafka rejects them at produce time on compacted topics).
- Each producer's last batch in the cleaned range survives, emptied if all its records go, so
  the idempotent producer's epoch and last sequence stay in the log (Kafka's rule).

Crash safety (the log is left as before or as after, never mixed): the cleaned copies are
written as `<base>.log.cleaned` and fsynced; then, under the log lock, a `cleaner.swap`
marker naming the replaced and the new base offsets is written atomically - the commit point.
The swap (rename `.cleaned` over `.log`, unlink replaced segments, rebuild indexes) is
idempotent, so `swap.finish_interrupted_swap` at open simply redoes it when the marker exists and
otherwise deletes stray `.cleaned` files.

Uncleanable partitions (Kafka's rule): a partition whose cleaning fails for a reason other than
the disk (damaged or malicious batches, such as a compression bomb written before the topic was
switched to compaction) would fail again on every pass, decompressing the same bytes and
logging the same error forever. It is marked uncleanable instead - one WARNING - and skipped
until its topic's config changes, its log is re-created, `forget` is called, or the broker
restarts (`UncleanablePartitions`). Disk faults (`OSError`) are retried: a full disk clears.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import pathlib
import threading
from typing import TYPE_CHECKING

from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.records import (
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    parse_control_record,
)
from kafkapy.storage import swap
from kafkapy.storage.checkpoint import fsync_dir, write_atomic
from kafkapy.storage.segment import LogSegment, segment_name

if TYPE_CHECKING:
    from kafkapy.storage.config import LogConfig
    from kafkapy.storage.log import PartitionLog

__all__ = [
    "CleanResult",
    "Uncleanable",
    "UncleanablePartitions",
    "clean_log",
    "dirty_bytes",
    "dirty_ratio",
]

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class CleanResult:
    """What one cleaning pass did (for logs and tests)."""

    segments_in: int
    segments_out: int
    bytes_in: int
    bytes_out: int
    records_removed: int
    end_offset: int  # first offset not cleaned: the new cleaner offset


# --- planning -------------------------------------------------------------------------------
def _cleanable(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    """Leading non-active segments the cleaner may rewrite (see the module rules)."""
    cfg = plog.config
    segments = plog.segments
    bases = [s.base_offset for s in segments]
    lso = plog.last_stable_offset
    out: list[LogSegment] = []
    for i, seg in enumerate(segments[:-1]):
        end = bases[i + 1]
        if end > lso:
            break
        if seg.size and now_ms - seg.largest_timestamp() < cfg.min_compaction_lag_ms:
            break
        out.append(seg)
    return out


def dirty_bytes(plog: PartitionLog, now_ms: int) -> int:
    """Bytes of the cleanable range not cleaned yet (Kafka's cleanable bytes)."""
    with plog._lock:
        return sum(s.size for s in _cleanable(plog, now_ms)
                   if s.base_offset >= plog.cleaner_offset)


def dirty_ratio(plog: PartitionLog, now_ms: int) -> float:
    """Share of the cleanable bytes not cleaned yet (0.0 when nothing is cleanable)."""
    with plog._lock:
        segments = _cleanable(plog, now_ms)
        total = sum(s.size for s in segments)
        dirty = sum(s.size for s in segments if s.base_offset >= plog.cleaner_offset)
    return dirty / total if total else 0.0


# --- cleaning -------------------------------------------------------------------------------
_KEEP, _DROP, _COMPACT = 0, 1, 2


def _batch_fates(segments: list[LogSegment]) -> tuple[dict[int, int], set[int]]:
    """Per data-batch base offset: keep as is (transaction not complete here), drop (aborted)
    or compact (plain or committed). Control batches are kept. Also the base offsets of each
    producer's last batch, which survive as empty batches when all their records go (as in
    Kafka: the idempotent producer's last sequence and epoch must stay in the log)."""
    fates: dict[int, int] = {}
    open_txns: dict[int, list[int]] = {}
    last_of_producer: dict[int, int] = {}
    for seg in segments:
        for _, header, data in seg.batches(with_data=True):
            if header.producer_id >= 0:
                last_of_producer[header.producer_id] = header.base_offset
            if header.is_control:
                assert data is not None
                fates[header.base_offset] = _KEEP
                try:
                    commit, _ = parse_control_record(decode_records(data, 0, header)[0])
                except (ProtocolError, IndexError):
                    continue
                for base in open_txns.pop(header.producer_id, []):
                    fates[base] = _COMPACT if commit else _DROP
            elif header.is_transactional:
                open_txns.setdefault(header.producer_id, []).append(header.base_offset)
                fates[header.base_offset] = _KEEP
            else:
                fates[header.base_offset] = _COMPACT
    return fates, set(last_of_producer.values())


def _offset_map(segments: list[LogSegment], fates: dict[int, int]) -> dict[bytes, int]:
    """Latest offset of every key among the batches that will be compacted."""
    latest: dict[bytes, int] = {}
    for seg in segments:
        for _, header, data in seg.batches(with_data=True):
            if fates.get(header.base_offset) != _COMPACT:
                continue
            assert data is not None
            for record in decode_records(data, 0, header):
                if record.key is not None:
                    latest[record.key] = header.base_offset + record.offset_delta
    return latest


def _retained(header: BatchHeader, records: list[Record], latest: dict[bytes, int],
              tombstone_horizon: int) -> list[Record]:
    out = []
    log_append_time = header.timestamp_type == 1  # every record carries the batch's max
    for record in records:
        if record.key is not None:
            if latest.get(record.key) != header.base_offset + record.offset_delta:
                continue
            if record.value is None:
                ts = (header.max_timestamp if log_append_time
                      else header.base_timestamp + record.timestamp_delta)
                if ts <= tombstone_horizon:
                    continue
        out.append(record)
    return out


def _rewrite(header: BatchHeader, data: memoryview, records: list[Record]) -> bytes:
    return build_batch(
        records,
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        log_append_time=header.timestamp_type == 1,
        max_timestamp=header.max_timestamp,
        last_offset_delta=header.last_offset_delta,
    )


def _groups(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive runs of source segments whose total size fits one output segment."""
    groups: list[list[LogSegment]] = []
    size = 0
    for seg in segments:
        if groups and size + seg.size <= max_bytes:
            groups[-1].append(seg)
            size += seg.size
        else:
            groups.append([seg])
            size = seg.size
    return groups


def clean_log(plog: PartitionLog, now_ms: int, *, force: bool = False) -> CleanResult | None:
    """One cleaning pass over `plog`, or None when nothing is due. Blocking: worker thread.

    Appends continue meanwhile (they only touch the active segment); the final swap takes the
    log lock and is abandoned if retention or truncation changed the segments in between.
    """
    plan = _plan(plog, now_ms, force)
    if plan is None:
        return None
    segments = plan.segments
    fates, producer_tails = _batch_fates(segments)
    latest = _offset_map(segments, fates)
    horizon = now_ms - plog.config.delete_retention_ms
    removed = bytes_out = 0
    new_bases: list[int] = []
    for group in _groups(segments, plog.config.segment_bytes):
        written, dropped = _write_cleaned(
            plog.directory, group, fates, producer_tails, latest, horizon
        )
        bytes_out += written
        removed += dropped
        new_bases.append(group[0].base_offset)
    fsync_dir(plog.directory)
    swap.crash_point("cleaned")
    if not _install(plog, plan, new_bases):
        return None
    log.info(
        "%s: cleaned %d segment(s) up to offset %d: %d -> %d bytes, %d records removed",
        plog.directory.name, len(segments), plan.end_offset, plan.bytes_in, bytes_out, removed,
    )
    return CleanResult(
        segments_in=len(segments),
        segments_out=len(new_bases),
        bytes_in=plan.bytes_in,
        bytes_out=bytes_out,
        records_removed=removed,
        end_offset=plan.end_offset,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """The segments one pass cleans, as they were when it was planned (sizes: to notice a
    change before the swap), and the offset the cleaned range ends at."""

    segments: list[LogSegment]
    sizes: list[int]
    bytes_in: int
    end_offset: int


def _plan(plog: PartitionLog, now_ms: int, force: bool) -> _Plan | None:
    """The pass to run, or None: nothing cleanable, nothing dirty, or (unless forced) a dirty
    ratio below `min.cleanable.dirty.ratio`."""
    with plog._lock:
        segments = _cleanable(plog, now_ms)
        sizes = [s.size for s in segments]
        total = sum(sizes)
        dirty = sum(s.size for s in segments if s.base_offset >= plog.cleaner_offset)
        if not segments or dirty == 0:
            return None
        if not force and dirty / total < plog.config.min_cleanable_dirty_ratio:
            return None
        end_offset = plog.segments[len(segments)].base_offset
    return _Plan(segments, sizes, total, end_offset)


def _write_cleaned(
    directory: pathlib.Path,
    group: list[LogSegment],
    fates: dict[int, int],
    producer_tails: set[int],
    latest: dict[bytes, int],
    horizon: int,
) -> tuple[int, int]:
    """Write `group`'s kept batches into one `.log.cleaned` file (fsynced): whole batches stay
    bytes; only compacted batches that lose records are rewritten. (bytes written, records
    removed)."""
    base = group[0].base_offset
    fd = os.open(
        directory / f"{segment_name(base)}.log.cleaned", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
    )
    removed = bytes_out = 0
    try:
        pending: list[bytes | memoryview] = []
        for seg in group:
            for _, header, data in seg.batches(with_data=True):
                assert data is not None
                fate = fates.get(header.base_offset, _KEEP)
                if fate == _DROP:
                    removed += header.records_count
                    continue
                if fate == _COMPACT:
                    records = decode_records(data, 0, header)
                    kept = _retained(header, records, latest, horizon)
                    removed += len(records) - len(kept)
                    if not kept and header.base_offset not in producer_tails:
                        continue
                    if len(kept) != len(records):
                        data = memoryview(_rewrite(header, data, kept))
                pending.append(bytes(data))
                if len(pending) >= 256:
                    bytes_out += _write_chunks(fd, pending)
            swap.crash_point("writing")
        bytes_out += _write_chunks(fd, pending)
        os.fsync(fd)
    finally:
        os.close(fd)
    return bytes_out, removed


def _install(plog: PartitionLog, plan: _Plan, new_bases: list[int]) -> bool:
    """Swap the cleaned files in under the log lock (crash-safe through the swap marker), or
    drop them when retention or truncation changed the planned segments meanwhile."""
    directory = plog.directory
    segments = plan.segments
    with plog._lock:
        current = plog.segments[: len(segments)]
        if current != segments or [s.size for s in current] != plan.sizes:
            for base in new_bases:
                with contextlib.suppress(FileNotFoundError):
                    (directory / f"{segment_name(base)}.log.cleaned").unlink()
            log.info("%s: segments changed during cleaning; clean abandoned", directory.name)
            return False
        old_bases = [s.base_offset for s in segments]
        write_atomic(
            directory / swap.SWAP_MARKER,
            swap.marker_text(old_bases, new_bases).encode(),
            fsync=True,
        )
        swap.crash_point("committed")
        swap.complete_swap(directory, old_bases, new_bases)
        swap.crash_point("swapped")
        fresh = swap.rebuild_indexes(directory, new_bases)
        for seg in fresh:
            seg.index_interval_bytes = plog.config.index_interval_bytes
        plog.replace_segments(segments, fresh)
        (directory / swap.SWAP_MARKER).unlink()
        fsync_dir(directory)
        plog.cleaner_offset = max(plog.cleaner_offset, plan.end_offset)
        plog.checkpoint_offsets(force=True)
    return True


def _write_chunks(fd: int, pending: list[bytes | memoryview]) -> int:
    data = memoryview(b"".join(pending))
    pending.clear()
    size = len(data)
    while data:
        data = data[os.write(fd, data) :]
    return size


# --- uncleanable partitions ------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class Uncleanable:
    """Why, and since when, the cleaner gave up on one partition."""

    data_dir: pathlib.Path
    reason: str
    since_ms: int
    config: LogConfig  # the config cleaning failed under: another one is worth a new try
    log: PartitionLog  # the log it failed on: a re-created log starts cleanable


class UncleanablePartitions:
    """The partitions the cleaner skips (see the module docstring), keyed by (topic, partition).

    Thread-safe: the cleaner thread marks and checks, the event loop forgets (on a config
    change) and reads (metrics, status page).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int], Uncleanable] = {}

    def skips(self, tp: tuple[str, int], plog: PartitionLog) -> bool:
        """Whether the cleaner skips `tp` on this pass. An entry whose log was re-created or
        whose config changed since is dropped: the partition is tried again."""
        with self._lock:
            entry = self._entries.get(tp)
            if entry is None:
                return False
            if entry.log is plog and entry.config == plog.config:
                return True
            del self._entries[tp]
        log.info("%s-%d: config or log changed, cleaning it again", tp[0], tp[1])
        return False

    def mark(self, tp: tuple[str, int], plog: PartitionLog, exc: BaseException,
             now_ms: int) -> None:
        """Give up on `tp` after `exc`; the one WARNING for it."""
        entry = Uncleanable(plog.directory.parent, f"{type(exc).__name__}: {exc}", now_ms,
                            plog.config, plog)
        with self._lock:
            self._entries[tp] = entry
        log.warning("cleaning %s-%d (%s) failed, marking it uncleanable until its config "
                    "changes or the broker restarts: %s", tp[0], tp[1], plog.directory,
                    entry.reason, exc_info=exc)

    def forget(self, tp: tuple[str, int]) -> bool:
        """Make `tp` cleanable again (its config changed, it was deleted); whether it was
        uncleanable."""
        with self._lock:
            return self._entries.pop(tp, None) is not None

    def partitions(self) -> dict[tuple[str, int], Uncleanable]:
        """A snapshot of the uncleanable partitions (for the status page)."""
        with self._lock:
            return dict(self._entries)

    def per_data_dir(self, now_ms: int) -> dict[pathlib.Path, tuple[int, int]]:
        """Per data dir: (`uncleanable-partitions-count`, `uncleanable-bytes`), Kafka's two
        per-log-dir metrics; the bytes are the dirty bytes left uncleaned. Blocking (walks
        segment sizes under each log's lock): cheap, but not for a tight loop."""
        out: dict[pathlib.Path, tuple[int, int]] = {}
        for entry in self.partitions().values():
            count, size = out.get(entry.data_dir, (0, 0))
            out[entry.data_dir] = (count + 1, size + dirty_bytes(entry.log, now_ms))
        return out
