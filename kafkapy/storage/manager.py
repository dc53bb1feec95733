"""`LogManager`: every partition log of the broker, across one or more data directories.

Why a clean-shutdown marker per data directory (`.kafka_cleanshutdown`, as in Kafka): after a
clean stop every log was flushed and checkpointed, so opening skips recovery entirely and costs
a directory listing, two small file reads and a short tail scan per partition - thousands of
partitions open in seconds. The marker is removed as soon as the directory is opened, so any
later crash forces recovery (from each log's recovery point only).

In-memory mode (`kafkapy serve --memory`): `LogManager.temporary()` puts the logs in a fresh
temporary directory that `close()` removes. The page cache makes it nearly as fast as RAM and
keeps one code path (no second segment backend to keep correct).

Fault isolation: one partition's storage failure never stops the others. A log that cannot be
opened at start-up (an unreadable file, a damaged directory), created, or renamed for deletion
is logged at ERROR with its path and cause and recorded as a `PartitionStorageError`
(`failed_logs()`): the caller takes that partition offline, the other partitions are served.
`get_or_create` refuses a failed partition (its directory still holds data), and `delete_log`
removes it - the way out when its topic is deleted.

Thread-safety: the map of logs has its own lock; maintenance methods (`run_retention`,
`run_cleaner`, `flush_dirty`) are meant for one worker thread and may run while the trio thread
appends and reads (see `PartitionLog` for the per-log rules).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkapy.protocol.errors import ProtocolError
from kafkapy.storage.checkpoint import fsync_dir
from kafkapy.storage.cleaner import CleanResult, UncleanablePartitions, clean_log
from kafkapy.storage.config import LogConfig
from kafkapy.storage.dirnames import (
    delete_dir_name,
    future_dir_name,
    is_unfinished_dir_name,
    log_dir_name,
    parse_log_dir_name,
    valid_topic_name,
)
from kafkapy.storage.errors import (
    InconsistentTopicIdError,
    KafkaStorageError,
    LogDirNotFoundError,
    PartitionStorageError,
    StorageError,
)
from kafkapy.storage.log import PartitionLog
from kafkapy.storage.writeback import PAGE_SIZE

__all__ = ["LogManager"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
_LOCK_FILE = ".lock"
_PER_LOG_SYNC_MAX = 64  # above this many logs, close() uses one sync(2) instead
TopicPartition = tuple[str, int]
# What one log's maintenance may raise; logged, never allowed to stop the other logs' turn
# (damaged bytes in an old segment, a failing disk).
_MAINTENANCE_ERRORS = (OSError, StorageError, ProtocolError)
# Writeback pacing: a partition's new bytes go to the kernel once 1 MiB has gathered, and
# whatever is left after 5 s (well before the kernel's own 30 s expiry).
WRITEBACK_MIN_BYTES = 1 << 20
WRITEBACK_MAX_DELAY_MS = 5_000


class LogManager:
    """Owns the `PartitionLog`s of all data directories (see the module docstring)."""

    def __init__(
        self,
        data_dirs: Sequence[Path | str] | Path | str,
        default_config: LogConfig | None = None,
        *,
        now_ms: int | None = None,
        on_io_failure: Callable[[Path, Path, str], None] | None = None,
    ) -> None:
        if isinstance(data_dirs, (str, Path)):
            data_dirs = [data_dirs]
        if not data_dirs:
            raise ValueError("at least one data directory is needed")
        self.data_dirs = [Path(d) for d in data_dirs]
        self.default_config = default_config if default_config is not None else LogConfig()
        self._lock = threading.Lock()
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._moving: set[TopicPartition] = set()  # between data dirs (`move_log`)
        # partitions whose directory failed to open or to be deleted (see the module docstring)
        self._failed: dict[TopicPartition, PartitionStorageError] = {}
        #: partitions the cleaner gave up on (Kafka's uncleanable partitions)
        self.uncleanable = UncleanablePartitions()
        # AlterReplicaLogDirs for a replica not hosted yet: where it goes when it is created
        self._preferred: dict[TopicPartition, Path] = {}
        self._per_dir = {d: 0 for d in self.data_dirs}  # logs per data dir, for placement
        self._temporary = False
        self._closed = False
        self.recovered_dirs: list[Path] = []
        #: how long each fsync of `flush_dirty` took (ms); the server drains it into its metrics
        self.flush_times_ms: list[float] = []
        #: per log, (end offset, truncations) when writeback last had nothing left to hand over
        self._written_back: dict[PartitionLog, tuple[int, int]] = {}
        #: per log, its offsets when a flush pass last left nothing due for it
        self._flushed: dict[PartitionLog, tuple[int, ...]] = {}
        self._dir_locks: list[int] = []
        #: told (data dir, log dir, reason) when a log's write or fsync fails with an I/O error
        #: (Kafka's LogDirFailureChannel); cluster mode halts the node (server/cluster/node.py)
        self.on_io_failure = on_io_failure
        started = time.monotonic()
        try:
            for data_dir in self.data_dirs:
                self._lock_dir(data_dir)
                self._open_dir(data_dir, now_ms)
        except BaseException:
            self._release_dir_locks()
            raise
        log.info("opened %d partition logs in %.2f s", len(self._logs),
                 time.monotonic() - started)

    @classmethod
    def temporary(cls, default_config: LogConfig | None = None) -> LogManager:
        """A manager over a fresh temp directory removed on `close()` (`--memory` mode)."""
        manager = cls([tempfile.mkdtemp(prefix="kafkapy-")], default_config)
        manager._temporary = True
        return manager

    def _lock_dir(self, data_dir: Path) -> None:
        """Hold `.lock` in the data dir (flock, like Kafka) so a second broker on the same
        directory fails at start instead of interleaving writes into the same segments."""
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise KafkaStorageError(
                f"data directory {data_dir} is in use by another process ({exc.strerror})"
            ) from exc
        self._dir_locks.append(fd)

    def _release_dir_locks(self) -> None:
        for fd in self._dir_locks:
            os.close(fd)  # closing the fd drops the flock
        self._dir_locks.clear()

    def _open_dir(self, data_dir: Path, now_ms: int | None) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        marker = data_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        if clean:
            marker.unlink()
            fsync_dir(data_dir)
        else:
            self.recovered_dirs.append(data_dir)
        with os.scandir(data_dir) as it:
            entries = [e for e in it if e.is_dir()]
        for entry in sorted(entries, key=lambda e: e.name):
            if is_unfinished_dir_name(entry.name):  # a delete or move a crash interrupted
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            tp = parse_log_dir_name(entry.name)
            if tp is None:
                continue
            if tp in self._logs or tp in self._failed:
                log.error("%s exists in two data directories; using the first", entry.name)
                continue
            self._open_log(tp, Path(entry.path), clean, now_ms)

    def _open_log(self, tp: TopicPartition, path: Path, clean: bool, now_ms: int | None) -> None:
        """Open one log found at start-up; a failure is this partition's alone.

        Anything an unreadable or damaged directory can raise is caught: the partition is
        recorded as failed and the other partitions still open.
        """
        try:
            plog = PartitionLog(path, None, defaults=self.default_config,
                                clean_shutdown=clean, now_ms=now_ms)
        except Exception as exc:
            self._fail(tp, path, exc, "cannot open the log")
            return
        self._logs[tp] = self._watched(plog)
        self._per_dir[path.parent] += 1

    def _fail(self, tp: TopicPartition, path: Path, exc: BaseException,
              what: str) -> PartitionStorageError:
        """Record (and log at ERROR) that `tp`'s directory failed; returns the error."""
        error = PartitionStorageError(tp[0], tp[1], path, exc)
        log.error("%s of %s-%d at %s: %s: %s; the partition is offline", what, tp[0], tp[1],
                  path, type(exc).__name__, exc)
        with self._lock:
            self._failed[tp] = error
        return error

    def _watched(self, plog: PartitionLog) -> PartitionLog:
        plog.io_failure_listener = self._io_failed
        return plog

    def _io_failed(self, directory: Path, reason: str) -> None:
        listener = self.on_io_failure
        if listener is not None:
            listener(directory.parent, directory, reason)

    # --- lookup and lifecycle ---------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def failed_logs(self) -> dict[TopicPartition, PartitionStorageError]:
        """Partitions whose directory could not be opened (at start-up) or deleted, with why.

        These partitions are offline: absent from `logs()`, refused by `get_or_create`, removed
        by `delete_log`. Kept until then (or the next start, which tries to open them again).
        """
        with self._lock:
            return dict(self._failed)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        """A snapshot of every open log by (topic, partition)."""
        with self._lock:
            return dict(self._logs)

    def get_or_create(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> PartitionLog:
        """The log of (topic, partition), created in the least-used data directory if absent.

        A given `config` replaces the log's config (persisted as overrides of the defaults);
        a `topic_id` differing from the directory's raises `InconsistentTopicIdError`.
        """
        if not valid_topic_name(topic) or partition < 0:
            raise KafkaStorageError(f"invalid topic partition {topic!r}-{partition}")
        with self._lock:
            if self._closed:
                raise KafkaStorageError("log manager is closed")
            if (topic, partition) in self._moving:
                raise KafkaStorageError(f"{topic}-{partition} is moving to another log dir")
            failed = self._failed.get((topic, partition))
            if failed is not None:
                raise PartitionStorageError(topic, partition, failed.path, failed.cause)
            existing = self._logs.get((topic, partition))
            if existing is not None:
                known = existing.topic_id
                if topic_id is not None and known.int and known != topic_id:
                    raise InconsistentTopicIdError(
                        f"{topic}-{partition} has topic id {known}, not {topic_id}"
                    )
                if config is not None:
                    existing.set_config(config, self.default_config)
                return existing
            target = self._preferred.pop((topic, partition), None) or min(
                self.data_dirs, key=lambda d: self._per_dir[d])
            path = target / log_dir_name(topic, partition)
            try:
                plog = self._watched(PartitionLog(path,
                                                  config if config is not None else self.default_config,
                                                  topic_id=topic_id))
            except Exception as exc:  # a directory left on disk may be damaged in any way
                log.error("cannot create the log of %s-%d at %s: %s: %s", topic, partition, path,
                          type(exc).__name__, exc)
                raise PartitionStorageError(topic, partition, path, exc) from exc
            if config is not None:
                plog.set_config(config, self.default_config)
            self._logs[(topic, partition)] = plog
            self._per_dir[target] += 1
            return plog

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and files (a failed one's too); False if there was none.

        The directory is renamed to a `...-delete` name first (atomic, and capped to fit the
        file name limit: `kafkapy.storage.dirnames`), so a crash mid-removal never leaves half
        a partition: leftovers are removed at the next start. Nothing is fsynced (DeleteTopics
        runs on the event loop): after a power loss a deleted partition may come back whole,
        and the caller, whose metadata says it is gone, deletes it again. When the rename
        fails, the partition is recorded as failed (see `failed_logs`) and
        `PartitionStorageError` is raised; calling again retries.
        """
        key = (topic, partition)
        with self._lock:
            plog = self._logs.pop(key, None)
            failed = self._failed.get(key)
            if plog is not None:
                self._per_dir[plog.directory.parent] -= 1
        self.uncleanable.forget(key)
        if plog is not None:
            plog.close(fsync=False)
            directory = plog.directory
        elif failed is not None:
            directory = failed.path
        else:
            return False
        doomed = directory.with_name(delete_dir_name(topic, partition))
        try:
            os.replace(directory, doomed)
        except FileNotFoundError:
            pass  # already gone (removed by hand)
        except OSError as exc:
            raise self._fail(key, directory, exc, "cannot delete the log") from exc
        with self._lock:
            self._failed.pop(key, None)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def data_dir_of(self, path: str) -> Path | None:
        """The configured data directory `path` names (absolute, resolved), or None."""
        wanted = Path(path)
        if not wanted.is_absolute():
            return None
        return next((d for d in self.data_dirs if d.resolve() == wanted.resolve()), None)

    def move_log(self, topic: str, partition: int, target_dir: str) -> PartitionLog | None:
        """Move a partition's log to another data directory (AlterReplicaLogDirs); blocking.

        Kafka copies into a `-future` replica while the current one keeps serving; here the log
        is closed (flushed), copied into `<name>.<id>-future` in the target directory, renamed
        into place and only then removed from the old directory, so a crash at any point
        leaves one complete copy (a leftover `-future` is removed at start-up). While it moves,
        the partition is absent: requests for it fail with a retriable storage error. Returns
        the log now open in the target directory (the same log when it is already there); for
        a replica not hosted here, None - the directory is remembered and the replica is created
        there (Kafka's preferred log dir). Raises LogDirNotFoundError, KeyError (the replica is
        moving already) or KafkaStorageError.
        """
        target = self.data_dir_of(target_dir)
        if target is None:
            raise LogDirNotFoundError(f"{target_dir} is not one of the log dirs")
        key = (topic, partition)
        with self._lock:
            plog = self._logs.get(key)
            if plog is None and key not in self._moving:
                self._preferred[key] = target  # as Kafka: created there later
                return None
            if plog is None:
                raise KeyError(key)
            if plog.directory.parent.resolve() == target.resolve():
                return plog
            self._moving.add(key)
            del self._logs[key]
        source = plog.directory
        try:
            plog.close()
            future = target / future_dir_name(topic, partition)
            try:
                shutil.copytree(source, future)
                for path in future.iterdir():
                    with open(path, "rb") as f:
                        os.fsync(f.fileno())
                os.replace(future, target / source.name)
                fsync_dir(target)
            except OSError as exc:
                shutil.rmtree(future, ignore_errors=True)
                self._reopen(key, source)
                raise KafkaStorageError(f"moving {source.name} to {target} failed: {exc}") from exc
            _remove_replaced(source, source.with_name(delete_dir_name(topic, partition)))
            moved = self._reopen(key, target / source.name)
        finally:
            with self._lock:
                self._moving.discard(key)
        with self._lock:
            self._per_dir[source.parent] -= 1
            self._per_dir[target] += 1
        return moved

    def _reopen(self, key: TopicPartition, directory: Path) -> PartitionLog:
        plog = self._watched(PartitionLog(directory, None, defaults=self.default_config, clean_shutdown=True))
        with self._lock:
            self._logs[key] = plog
        return plog

    # --- maintenance (worker thread) -------------------------------------------------------
    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        deleted = 0
        for plog in self.logs().values():
            try:
                deleted += plog.delete_old_segments(now_ms)
            except _MAINTENANCE_ERRORS as exc:
                log.error("retention of %s failed: %s", plog.directory.name, exc)
        return deleted

    def run_cleaner(self, now_ms: int) -> list[CleanResult]:
        """One compaction pass over every log whose policy includes `compact`, except the
        uncleanable ones (`self.uncleanable`, see `kafkapy.storage.cleaner`)."""
        results = []
        for tp, plog in self.logs().items():
            if not plog.config.compact or plog.offline or self.uncleanable.skips(tp, plog):
                continue
            try:
                result = clean_log(plog, now_ms)
            except (OSError, KafkaStorageError) as exc:  # the disk: may clear (space freed)
                log.error("cleaning %s-%d failed: %s", tp[0], tp[1], exc)
                continue
            except Exception as exc:  # the log's bytes: would fail the same way every pass
                self.uncleanable.mark(tp, plog, exc, now_ms)
                continue
            if result is not None:
                results.append(result)
        return results

    def flush_dirty(self, now_ms: int) -> int:
        """fsync logs whose `flush.ms` / `flush.messages` is due; checkpoint the others'
        offsets where they changed (an idle log's files are left alone: with thousands of
        partitions this runs every `log.flush.scheduler.interval.ms`). A log whose offsets have
        not moved since a pass left it with no flush ever due and its checkpoint current is
        passed over without its lock.

        Returns how many logs were fsynced.
        """
        flushed = 0
        logs = self.logs()
        done = self._flushed
        for plog in logs.values():
            mark = _offsets_mark(plog)
            if done.get(plog) == mark or plog.offline:
                continue
            try:
                if plog.needs_flush(now_ms):
                    started = time.perf_counter()
                    plog.flush()
                    self.flush_times_ms.append((time.perf_counter() - started) * 1000)
                    flushed += 1
                else:
                    plog.checkpoint_offsets(now_ms=now_ms)
            except _MAINTENANCE_ERRORS as exc:
                log.error("flushing %s failed: %s", plog.directory.name, exc)
                continue
            if not plog.needs_flush(_NEVER_MS) and plog.offsets_checkpointed():
                done[plog] = mark
            else:
                done.pop(plog, None)
        if len(done) > 2 * len(logs) + 64:  # logs deleted or reopened since: forget them
            current = set(logs.values())
            self._flushed = {p: m for p, m in done.items() if p in current}
        return flushed

    def start_writeback(self, now_ms: int, *, min_bytes: int = WRITEBACK_MIN_BYTES,
                        max_delay_ms: int = WRITEBACK_MAX_DELAY_MS) -> int:
        """Pace the kernel's writeback of new log bytes (see `kafkapy.storage.writeback`):
        every log with `min_bytes` waiting, or with any waiting for `max_delay_ms`. For a
        worker thread, every fraction of a second; returns the bytes handed to the kernel.

        A log whose end has not moved (nor been cut) since every whole page of it was handed
        over is skipped without taking its lock: with thousands of idle partitions a pass costs
        a lookup per log, the work is for the logs that were written to."""
        started = 0
        logs = self.logs()
        done = self._written_back
        for plog in logs.values():
            mark = (plog.log_end_offset, plog.truncations)
            if done.get(plog) == mark:
                continue
            try:
                started += plog.start_writeback(now_ms, min_bytes=min_bytes,
                                                max_delay_ms=max_delay_ms)
            except _MAINTENANCE_ERRORS as exc:
                log.error("writeback of %s failed: %s", plog.directory.name, exc)
                continue
            if _whole_pages_pending(plog):
                done.pop(plog, None)
            else:
                done[plog] = mark
        if len(done) > 2 * len(logs) + 64:  # logs deleted or reopened since: forget them
            current = set(logs.values())
            self._written_back = {p: m for p, m in done.items() if p in current}
        return started

    def close(self, clean: bool = True) -> None:
        """Flush and close every log; with `clean`, mark the directories cleanly shut down."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            logs = list(self._logs.values())
        if self._temporary:
            for plog in logs:
                plog.close(fsync=False)
            self._release_dir_locks()
            for data_dir in self.data_dirs:
                shutil.rmtree(data_dir, ignore_errors=True)
            return
        if len(logs) <= _PER_LOG_SYNC_MAX:
            # A few logs: their own fsyncs, so shutdown does not wait for other processes'
            # dirty pages as sync(2) would.
            for plog in logs:
                plog.close()
        else:
            # Thousands of per-log fsyncs would take many seconds; instead every log writes
            # its files, one sync(2) makes them all durable, then the recovery points move
            # and a second sync(2) makes the checkpoints durable before the marker.
            for plog in logs:
                plog.close(fsync=False)
            os.sync()
            for plog in logs:
                plog.mark_synced()
            os.sync()
        if clean and not any(p.offline for p in logs):
            # a dir with a log that failed to open gets no marker: the next start recovers it
            failed_dirs = {e.path.parent for e in self.failed_logs().values()}
            for data_dir in self.data_dirs:
                if data_dir in failed_dirs:
                    continue
                (data_dir / CLEAN_SHUTDOWN_MARKER).touch()
                fsync_dir(data_dir)
        self._release_dir_locks()


def _remove_replaced(source: Path, doomed: Path) -> None:
    """Remove the old copy of a moved log. Its rename failing must not leave it whole: at the
    next start it would compete with the new copy, so it is removed in place instead."""
    try:
        os.replace(source, doomed)
    except OSError as exc:
        log.error("cannot rename %s for deletion (%s); removing it in place", source, exc)
        doomed = source
    shutil.rmtree(doomed, ignore_errors=True)


#: a time no flush.ms reaches: `needs_flush(_NEVER_MS)` says whether a flush will ever be due
_NEVER_MS = 2**62


def _offsets_mark(plog: PartitionLog) -> tuple[int, ...]:
    """What a flush pass acts on: a log whose mark is unchanged has nothing new to flush or
    checkpoint."""
    return (plog.log_end_offset, plog.high_watermark, plog.log_start_offset, plog.recovery_point,
            plog.cleaner_offset, plog.truncations)


def _whole_pages_pending(plog: PartitionLog) -> bool:
    """Bytes of `plog` not yet handed to the kernel's writeback, the active segment's last
    partial page aside (left for a later append, as `PartitionLog.start_writeback` does).
    Read without the log's lock: the caller marks the log done with its end offset as read
    before, so a racing append shows as a moved end at the next pass."""
    segments = plog.segments
    active = segments[-1]
    for seg in reversed(segments):
        end = seg.size if seg is not active else seg.size - seg.size % PAGE_SIZE
        if seg.is_open and end > seg.written_back:
            return True
        if seg is not active and seg.written_back >= seg.size:
            return False  # older ones were handed over before it
    return False
