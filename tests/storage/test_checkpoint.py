"""Checkpoint files: atomic, self-validating, and the leader-epoch cache's rules."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage.checkpoint import (
    REMOTE_LOG_START_FILE,
    LeaderEpochCache,
    OffsetsCheckpoint,
    PartitionMetadata,
    read_remote_log_start,
    write_remote_log_start,
)


def test_offsets_checkpoint_round_trip_and_garbage(tmp_path: Path) -> None:
    assert OffsetsCheckpoint.read(tmp_path) is None
    ckpt = OffsetsCheckpoint(log_start_offset=5, recovery_point=9, high_watermark=7,
                             cleaner_offset=6)
    ckpt.write(tmp_path, fsync=True)
    assert OffsetsCheckpoint.read(tmp_path) == ckpt
    assert not list(tmp_path.glob("*.tmp"))
    for garbage in (b"", b"version 1\n", b"version 0\nlog_start_offset x\n",
                    b"version 0\nlog_start_offset 1\n", b"\xff\xfe", b"version 0\nbogus 1\n"):
        (tmp_path / "offsets.checkpoint").write_bytes(garbage)
        assert OffsetsCheckpoint.read(tmp_path) is None


@given(st.integers(0, 2**63 - 1), st.binary(max_size=40))
@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])  # fsyncs
def test_remote_log_start_round_trip_and_garbage(tmp_path: Path, offset: int, garbage: bytes) -> None:
    assert read_remote_log_start(tmp_path / "absent") == -1
    write_remote_log_start(tmp_path, offset)
    assert read_remote_log_start(tmp_path) == offset
    assert not (tmp_path / (REMOTE_LOG_START_FILE + ".tmp")).exists()
    (tmp_path / REMOTE_LOG_START_FILE).write_bytes(garbage)  # a torn or foreign file: none
    assert read_remote_log_start(tmp_path) == -1


def test_partition_metadata_round_trip(tmp_path: Path) -> None:
    meta = PartitionMetadata(topic_id=uuid.uuid4(),
                             config_overrides={"cleanup.policy": "compact", "a.b": "x=y"})
    meta.write(tmp_path, fsync=False)
    assert PartitionMetadata.read(tmp_path) == meta
    (tmp_path / "partition.metadata").write_text("version 0\ntopic_id nope\n")
    assert PartitionMetadata.read(tmp_path) is None


def test_leader_epoch_cache_queries(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.assign(1, 0)
    assert cache.assign(3, 10)
    assert not cache.assign(2, 20)  # older epochs never open an entry
    # older than anything known: that epoch's data is not here, its end is where history begins
    assert cache.end_offset_for(0, 50) == (0, 0)
    assert cache.end_offset_for(1, 50) == (1, 10)
    assert cache.end_offset_for(2, 50) == (1, 10)
    assert cache.end_offset_for(3, 50) == (3, 50)
    assert cache.end_offset_for(9, 50) == (3, 50)
    cache.write(fsync=True)
    assert LeaderEpochCache.load(tmp_path).entries == [(1, 0), (3, 10)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n3 10\n1 0\n")  # not increasing
    assert LeaderEpochCache.load(tmp_path).entries == []


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["assign", "end", "start"]),
                              st.integers(0, 8), st.integers(0, 60)), max_size=30))
def test_leader_epoch_cache_matches_model(tmp_path: Path,
                                          ops: list[tuple[str, int, int]]) -> None:
    """Model: the list of (epoch, start offset), both strictly increasing."""
    cache = LeaderEpochCache(tmp_path)
    model: list[tuple[int, int]] = []
    for op, epoch, offset in ops:
        if op == "assign":
            cache.assign(epoch, offset)
            if not model or epoch > model[-1][0]:
                model = [e for e in model if e[1] < offset] + [(epoch, offset)]
        elif op == "end":
            cache.truncate_from_end(offset)
            model = [e for e in model if e[1] < offset]
        else:
            cache.truncate_from_start(offset)
            before = [e for e in model if e[1] <= offset]
            if before:
                model = [(before[-1][0], offset)] + [e for e in model if e[1] > offset]
        assert cache.entries == model
        epochs = [e for e, _ in model]
        offsets = [o for _, o in model]
        assert epochs == sorted(set(epochs))
        assert offsets == sorted(set(offsets))
    cache.write(fsync=False)
    assert LeaderEpochCache.load(tmp_path).entries == model
