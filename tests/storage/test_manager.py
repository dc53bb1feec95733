"""LogManager: opening many partitions fast, placement, configs, deletion, maintenance."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafkapy.storage import (
    InconsistentTopicIdError,
    KafkaStorageError,
    LogConfig,
    LogManager,
    PartitionLog,
)
from kafkapy.storage.errors import LogDirNotFoundError, PartitionStorageError
from kafkapy.storage.manager import CLEAN_SHUTDOWN_MARKER
from tests.storage.helpers import BASE_TS, batch, read_all

pytestmark = pytest.mark.timeout(120)


def test_opening_2000_partitions_takes_seconds(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    for p in range(2000):
        manager.get_or_create("many", p).append(batch([b"p%d" % p]), now_ms=BASE_TS)
    manager.close()
    started = time.monotonic()
    reopened = LogManager([tmp_path])
    clean_s = time.monotonic() - started
    reopened.close(clean=False)
    started = time.monotonic()
    recovered = LogManager([tmp_path])
    unclean_s = time.monotonic() - started
    print(f"\nopen 2000 partitions: clean shutdown {clean_s:.2f} s, "
          f"after a crash (recovery from the recovery point) {unclean_s:.2f} s")
    logs = recovered.logs()
    assert len(logs) == 2000
    for p in (0, 777, 1999):
        plog = logs[("many", p)]
        assert plog.log_end_offset == 1
        assert read_all(plog)[0][2] == b"p%d" % p
    recovered.close()


def test_clean_shutdown_marker_decides_recovery(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.get_or_create("t", 0).append(batch([b"a"]), now_ms=BASE_TS)
    assert manager.recovered_dirs == [tmp_path]  # a fresh directory has no marker
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    again = LogManager([tmp_path])
    assert again.recovered_dirs == []
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()  # a crash from now on recovers
    again.close(clean=False)
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()


def test_configs_and_topic_ids_survive_restart(tmp_path: Path) -> None:
    defaults = LogConfig(retention_ms=1000)
    manager = LogManager([tmp_path], defaults)
    tid = uuid.uuid4()
    cfg = LogConfig.from_topic_configs({"cleanup.policy": "compact", "segment.bytes": "4096"},
                                       defaults)
    manager.get_or_create("topic.with-dash", 3, cfg, tid)
    manager.get_or_create("plain", 0)
    manager.close()
    again = LogManager([tmp_path], defaults)
    log = again.get("topic.with-dash", 3)
    assert log is not None
    assert log.topic_id == tid
    assert log.config.compact
    assert log.config.segment_bytes == 4096
    assert log.config.retention_ms == 1000
    plain = again.get("plain", 0)
    assert plain is not None
    assert plain.config == defaults
    with pytest.raises(InconsistentTopicIdError):
        again.get_or_create("topic.with-dash", 3, topic_id=uuid.uuid4())
    again.close()


def test_delete_log_removes_files_and_leftovers(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.get_or_create("t", 0).append(batch([b"a"]), now_ms=BASE_TS)
    assert manager.delete_log("t", 0)
    assert not manager.delete_log("t", 0)
    assert manager.get("t", 0) is None
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    (tmp_path / "t-1.abc-delete").mkdir()  # a deletion interrupted by a crash
    manager.close()
    again = LogManager([tmp_path])
    assert again.logs() == {}
    assert not (tmp_path / "t-1.abc-delete").exists()
    fresh = again.get_or_create("t", 0)
    assert fresh.log_end_offset == 0
    again.close()


def test_logs_spread_over_data_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    for p in range(6):
        manager.get_or_create("t", p)
    assert sorted(len([p for p in d.iterdir() if p.is_dir()]) for d in dirs) == [3, 3]
    manager.close()
    again = LogManager(dirs)
    assert len(again.logs()) == 6
    again.close()


def test_maintenance_tasks(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=512, retention_ms=1000, flush_messages=2)
    manager = LogManager([tmp_path], cfg)
    plog = manager.get_or_create("t", 0)
    for _ in range(20):
        plog.append(batch([b"x" * 40]), now_ms=BASE_TS)
    plog.high_watermark = plog.log_end_offset
    compacted = manager.get_or_create("c", 0, LogConfig.from_topic_configs(
        {"cleanup.policy": "compact"}, cfg))
    for i in range(20):
        compacted.append(batch([b"v%d" % i], keys=[b"k"]), now_ms=BASE_TS)
    compacted.roll(BASE_TS)
    compacted.high_watermark = compacted.log_end_offset
    assert manager.flush_dirty(BASE_TS) == 2  # flush.messages reached on both
    assert plog.recovery_point == plog.log_end_offset
    assert manager.run_retention(BASE_TS + 10_000) > 0
    assert plog.log_start_offset > 0
    results = manager.run_cleaner(BASE_TS + 10_000)
    assert len(results) == 1
    assert [v for _, _, v in read_all(compacted)] == [b"v19"]
    manager.close()


def test_temporary_manager_cleans_up(tmp_path: Path) -> None:
    manager = LogManager.temporary()
    directory = manager.data_dirs[0]
    manager.get_or_create("t", 0).append(batch([b"a"]), now_ms=BASE_TS)
    assert directory.exists()
    manager.close()
    assert not directory.exists()


def test_high_watermark_checkpoints_are_rate_limited(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    plog = manager.get_or_create("t", 0)
    for i in range(3):
        plog.append(batch([b"%d" % i]), now_ms=BASE_TS)
    ckpt = tmp_path / "t-0" / "offsets.checkpoint"
    plog.high_watermark = 1
    manager.flush_dirty(BASE_TS)
    assert "high_watermark 1" in ckpt.read_text()
    plog.high_watermark = 2
    manager.flush_dirty(BASE_TS + 1000)
    assert "high_watermark 1" in ckpt.read_text()  # within the 5 s interval
    manager.flush_dirty(BASE_TS + 5000)
    assert "high_watermark 2" in ckpt.read_text()
    manager.close()


_STATE_FILES = ("offsets.checkpoint", "leader-epoch-checkpoint", "partition.metadata")


@pytest.mark.parametrize("partitions", [3, 70])  # per-log fsync close / bulk sync(2) close
def test_idle_logs_are_not_rewritten(tmp_path: Path, partitions: int) -> None:
    """An idle log's state files stay the very same files through flush cycles and shutdown,
    while a log whose high watermark moved gets a new checkpoint (the state survives)."""
    data, links = tmp_path / "data", tmp_path / "links"
    links.mkdir()
    manager = LogManager([data])
    for p in range(partitions):
        plog = manager.get_or_create("t", p)
        plog.append(batch([b"a"]), now_ms=BASE_TS)
        plog.high_watermark = plog.log_end_offset
    manager.close()
    manager = LogManager([data])
    # A hard link pins each file's inode, so a rewrite (temp file + rename) cannot reuse it.
    for p in range(partitions):
        for name in _STATE_FILES:
            (links / f"{p}-{name}").hardlink_to(data / f"t-{p}" / name)
    busy = manager.get("t", 0)
    assert busy is not None
    busy.append(batch([b"b"]), now_ms=BASE_TS)
    busy.high_watermark = busy.log_end_offset
    for step in range(4):
        manager.flush_dirty(BASE_TS + step * 5000)
    assert "high_watermark 2" in (data / "t-0" / "offsets.checkpoint").read_text()
    manager.close()

    def same(p: int, name: str) -> bool:
        return (links / f"{p}-{name}").samefile(data / f"t-{p}" / name)

    assert not same(0, "offsets.checkpoint")
    rewritten = [(p, n) for p in range(1, partitions) for n in _STATE_FILES if not same(p, n)]
    assert rewritten == []
    again = LogManager([data])
    logs = again.logs()
    assert logs[("t", 0)].high_watermark == 2
    assert logs[("t", 0)].recovery_point == 2
    assert all(logs[("t", p)].high_watermark == 1 for p in range(1, partitions))
    again.close()


def test_flush_syncs_an_unchanged_checkpoint_without_rewriting_it(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig(flush_messages=2))
    plog = manager.get_or_create("t", 0)
    plog.append(batch([b"a"]), now_ms=BASE_TS)
    plog.flush()  # recovery point 1 checkpointed
    plog.high_watermark = 1
    manager.flush_dirty(BASE_TS)  # HW checkpoint, unsynced
    ckpt = tmp_path / "t-0" / "offsets.checkpoint"
    link = tmp_path / "pinned"
    link.hardlink_to(ckpt)
    plog.flush()  # nothing changed: an fsync of the same file, no rewrite
    plog.checkpoint_offsets(force=True)
    assert link.samefile(ckpt)
    plog.append(batch([b"b"]), now_ms=BASE_TS)
    assert manager.flush_dirty(BASE_TS) == 0  # flush.messages not reached
    plog.append(batch([b"c"]), now_ms=BASE_TS)
    assert manager.flush_dirty(BASE_TS) == 1
    assert not link.samefile(ckpt)
    assert "recovery_point 3" in ckpt.read_text()
    manager.close()


def test_a_damaged_log_does_not_stop_maintenance_of_others(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=512, retention_ms=1000, cleanup_policy="compact,delete")
    manager = LogManager([tmp_path], cfg)
    logs = [manager.get_or_create("t", p) for p in range(2)]
    for plog in logs:
        for i in range(20):
            plog.append(batch([b"v%d" % i], keys=[b"k"]), now_ms=BASE_TS)
        plog.high_watermark = plog.log_end_offset
    manager.close()
    first = tmp_path / "t-0" / "00000000000000000000.log"
    raw = bytearray(first.read_bytes())
    raw[16] = 9  # bad magic in the oldest segment of t-0 (below the recovery point)
    first.write_bytes(bytes(raw))
    again = LogManager([tmp_path], cfg)
    assert again.run_cleaner(BASE_TS) != []  # t-1 still cleaned
    assert again.run_retention(BASE_TS + 10**6) > 0  # and still retained
    again.close()


def test_a_data_dir_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    first = LogManager([tmp_path])
    with pytest.raises(KafkaStorageError, match="in use"):
        LogManager([tmp_path / "other", tmp_path])  # the lock of the 1st dir is released too
    second_dir_free = LogManager([tmp_path / "other"])
    second_dir_free.close()
    first.close()
    again = LogManager([tmp_path])
    again.close()


def test_move_log_between_data_dirs_keeps_the_log_and_survives_restart(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    plog = manager.get_or_create("t", 0, LogConfig(retention_ms=1234))
    plog.append(batch([b"x", b"y"]), now_ms=BASE_TS)
    source = plog.directory.parent
    target = next(d for d in dirs if d != source)
    moved = manager.move_log("t", 0, str(target.resolve()))
    assert moved.directory == target / "t-0"
    assert manager.get("t", 0) is moved
    assert not (source / "t-0").exists()
    assert [v for _, _, v in read_all(moved)] == [b"x", b"y"]
    assert moved.config.retention_ms == 1234  # the overrides moved with it
    assert manager.move_log("t", 0, str(target)) is moved  # already there: nothing to do
    with pytest.raises(LogDirNotFoundError):
        manager.move_log("t", 0, str(tmp_path / "elsewhere"))
    assert manager.move_log("t", 9, str(target)) is None  # not hosted: remembered for later
    assert manager.get_or_create("t", 9).directory == target / "t-9"
    moved.append(batch([b"z"]), now_ms=BASE_TS)
    (source / "t-0.abc-future").mkdir()  # a copy interrupted by a crash
    manager.close()
    again = LogManager(dirs)
    assert [v for _, _, v in read_all(again.get("t", 0))] == [b"x", b"y", b"z"]  # type: ignore[arg-type]
    assert not (source / "t-0.abc-future").exists()
    again.close()


def test_a_failed_copy_leaves_the_log_where_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    manager.get_or_create("t", 0).append(batch([b"x"]), now_ms=BASE_TS)
    source = manager.get("t", 0).directory.parent  # type: ignore[union-attr]
    target = next(d for d in dirs if d != source)

    def full_disk(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copytree", full_disk)
    with pytest.raises(KafkaStorageError):
        manager.move_log("t", 0, str(target))
    back = manager.get("t", 0)
    assert back is not None
    assert back.directory == source / "t-0"
    assert [v for _, _, v in read_all(back)] == [b"x"]
    assert [p for p in target.iterdir() if p.is_dir()] == []
    manager.close()


def test_an_io_failure_of_any_log_is_reported_with_its_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LogDirFailureChannel: a failed write or fsync of a log - opened at start or
    created later - reaches `on_io_failure` with the data dir, the log dir and the reason (the
    cluster node halts on it); the caller still gets KAFKA_STORAGE_ERROR."""
    import errno
    import os

    import kafkapy.storage.segment as segment

    first = LogManager([tmp_path])
    first.get_or_create("old", 0).append(batch([b"a"]), now_ms=BASE_TS)
    first.close()
    reports: list[tuple[Path, Path, str]] = []
    manager = LogManager(
        [tmp_path], on_io_failure=lambda data_dir, log_dir, reason: reports.append((data_dir, log_dir, reason))
    )
    fresh = manager.get_or_create("new", 0)
    fresh.append(batch([b"b"]), now_ms=BASE_TS)

    def full(fd: int, data: object, position: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment, "_write_all", full)
    for plog in (manager.get("old", 0), fresh):
        assert plog is not None
        with pytest.raises(KafkaStorageError):
            plog.append(batch([b"c"]), now_ms=BASE_TS)
    assert [(d, p.name) for d, p, _ in reports] == [(tmp_path, "old-0"), (tmp_path, "new-0")]
    assert all("No space left" in reason for _, _, reason in reports)

    monkeypatch.undo()

    def fsync_fails(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    fresh.append(batch([b"d"]), now_ms=BASE_TS)
    monkeypatch.setattr(os, "fsync", fsync_fails)
    with pytest.raises(KafkaStorageError):
        fresh.flush()
    assert reports[-1][1].name == "new-0"
    assert "fsync failed" in reports[-1][2]
    monkeypatch.undo()
    manager.close(clean=False)


LONGEST_TOPIC = "x" * 249  # Kafka's longest topic name


def test_a_topic_with_the_longest_name_is_deleted_and_recreated(tmp_path: Path) -> None:
    """Deleting renames `<topic>-<p>` to a `-delete` name first; with 249 characters it must
    still fit in 255 bytes, or the old data stays on disk under the re-created topic."""
    manager = LogManager([tmp_path])
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    manager.get_or_create(LONGEST_TOPIC, 0, topic_id=old_id).append(batch([b"old"]), now_ms=BASE_TS)
    manager.get_or_create("other", 0).append(batch([b"kept"]), now_ms=BASE_TS)
    assert manager.delete_log(LONGEST_TOPIC, 0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["other-0"]
    fresh = manager.get_or_create(LONGEST_TOPIC, 0, topic_id=new_id)
    assert fresh.log_end_offset == 0
    fresh.append(batch([b"new"]), now_ms=BASE_TS)
    manager.close()
    again = LogManager([tmp_path])
    assert again.failed_logs() == {}
    reopened = again.get(LONGEST_TOPIC, 0)
    assert reopened is not None
    assert reopened.topic_id == new_id
    assert [v for _, _, v in read_all(reopened)] == [b"new"]
    other = again.get("other", 0)
    assert other is not None
    assert [v for _, _, v in read_all(other)] == [b"kept"]
    again.close()


def test_a_long_topic_moves_between_data_dirs(tmp_path: Path) -> None:
    """The `-future` copy and the `-delete` of the source fit in 255 bytes too."""
    source, target = tmp_path / "a", tmp_path / "b"
    manager = LogManager([source, target])
    plog = manager.get_or_create(LONGEST_TOPIC, 7)
    plog.append(batch([b"x"]), now_ms=BASE_TS)
    home = plog.directory.parent
    other = target if home == source else source
    moved = manager.move_log(LONGEST_TOPIC, 7, str(other))
    assert moved is not None
    assert moved.directory == other / f"{LONGEST_TOPIC}-7"
    assert [v for _, _, v in read_all(moved)] == [b"x"]
    assert [p for p in home.iterdir() if p.is_dir()] == []
    manager.close()


def test_leftovers_of_capped_and_old_deletes_and_moves_are_removed_at_start(tmp_path: Path) -> None:
    from kafkapy.storage.dirnames import delete_dir_name, future_dir_name

    leftovers = [delete_dir_name(LONGEST_TOPIC, 3), future_dir_name(LONGEST_TOPIC, 3),
                 f"t-0.{uuid.uuid4().hex}-delete", f"t-0.{uuid.uuid4().hex}-future"]
    for name in leftovers:
        (tmp_path / name).mkdir()
        (tmp_path / name / "00000000000000000000.log").write_bytes(b"stale")
    manager = LogManager([tmp_path])
    assert manager.logs() == {}
    assert manager.failed_logs() == {}
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    manager.close()


def _damage(manager_dir: Path, name: str) -> Path:
    """Make a file of the log `name` unreadable: a directory where its segment should be."""
    segment = manager_dir / name / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()
    return manager_dir / name


@pytest.mark.parametrize("clean", [True, False])
def test_a_log_that_cannot_be_opened_fails_alone(
    tmp_path: Path, clean: bool, caplog: pytest.LogCaptureFixture
) -> None:
    manager = LogManager([tmp_path])
    for p in range(3):
        manager.get_or_create("t", p).append(batch([b"v%d" % p]), now_ms=BASE_TS)
    manager.close(clean=clean)
    broken = _damage(tmp_path, "t-1")
    again = LogManager([tmp_path])
    assert sorted(again.logs()) == [("t", 0), ("t", 2)]
    for p in (0, 2):
        plog = again.get("t", p)
        assert plog is not None
        assert [v for _, _, v in read_all(plog)] == [b"v%d" % p]
    failure = again.failed_logs()[("t", 1)]
    assert (failure.topic, failure.partition, failure.path) == ("t", 1, broken)
    assert isinstance(failure.cause, OSError)
    assert failure.error_code == KafkaStorageError.error_code
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1
    assert str(broken) in errors[0].getMessage()
    assert "Is a directory" in errors[0].getMessage()
    # refused, not created afresh over the data still in its directory
    with pytest.raises(PartitionStorageError) as refused:
        again.get_or_create("t", 1)
    assert refused.value.path == broken
    again.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()  # the next start recovers


def test_deleting_a_log_that_failed_to_open_removes_it(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.get_or_create("t", 0).append(batch([b"a"]), now_ms=BASE_TS)
    manager.close()
    _damage(tmp_path, "t-0")
    again = LogManager([tmp_path])
    assert again.delete_log("t", 0)
    assert again.failed_logs() == {}
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    assert again.get_or_create("t", 0).log_end_offset == 0
    again.close()


def test_a_failed_delete_is_reported_for_its_partition_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    manager = LogManager([tmp_path])
    for p in range(2):
        manager.get_or_create("t", p).append(batch([b"a"]), now_ms=BASE_TS)
    real_replace = os.replace

    def replace_fails(src: Path, dst: Path) -> None:
        if str(dst).endswith("-delete"):
            raise OSError(errno.EIO, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_fails)
    with pytest.raises(PartitionStorageError) as failed:
        manager.delete_log("t", 0)
    assert (failed.value.topic, failed.value.partition) == ("t", 0)
    assert failed.value.path == tmp_path / "t-0"
    assert ("t", 0) in manager.failed_logs()
    assert manager.get("t", 1) is not None  # the other partition is untouched
    with pytest.raises(PartitionStorageError):
        manager.get_or_create("t", 0, topic_id=uuid.uuid4())  # not over the old data
    monkeypatch.setattr(os, "replace", real_replace)
    assert manager.delete_log("t", 0)
    assert manager.failed_logs() == {}
    assert not (tmp_path / "t-0").exists()
    manager.close()


def test_a_flush_pass_leaves_idle_logs_alone_and_misses_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of idle partitions: a flush pass takes no log's lock for logs whose offsets
    have not moved since they were left with nothing due, and still checkpoints a HW move and
    fsyncs a log whose flush.ms comes due later."""
    touched: list[str] = []
    checkpoint, flush = PartitionLog.checkpoint_offsets, PartitionLog.flush

    def counted_checkpoint(self: PartitionLog, **kwargs: Any) -> None:
        touched.append(self.directory.name)
        checkpoint(self, **kwargs)

    def counted_flush(self: PartitionLog) -> None:
        touched.append("flush " + self.directory.name)
        flush(self)

    monkeypatch.setattr(PartitionLog, "checkpoint_offsets", counted_checkpoint)
    monkeypatch.setattr(PartitionLog, "flush", counted_flush)
    manager = LogManager([tmp_path], LogConfig())
    logs = [manager.get_or_create("t", p) for p in range(10)]
    for plog in logs:
        plog.append(batch([b"a"]), now_ms=BASE_TS)
        plog.high_watermark = 1
    manager.flush_dirty(BASE_TS + 60_000)
    assert len(touched) == 10
    touched.clear()
    manager.flush_dirty(BASE_TS + 120_000)
    assert touched == []  # idle: nothing checked
    logs[4].append(batch([b"b"]), now_ms=BASE_TS)
    logs[4].high_watermark = 2
    manager.flush_dirty(BASE_TS + 180_000)
    assert touched == ["t-4"]
    assert "high_watermark 2" in (tmp_path / "t-4" / "offsets.checkpoint").read_text()
    slow = manager.get_or_create("s", 0, LogConfig(flush_ms=10_000))
    slow.append(batch([b"x"]), now_ms=BASE_TS)
    touched.clear()
    now = int(time.time() * 1000)
    manager.flush_dirty(now)  # not due yet, but it will be: the log stays in the pass
    manager.flush_dirty(now + 20_000)
    assert touched == ["s-0", "flush s-0"]
    manager.close()
