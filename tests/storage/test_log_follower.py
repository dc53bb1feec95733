"""What a follower needs from PartitionLog: offsets and epochs kept, the leader-epoch cache,
truncation to a diverging epoch's end (KIP-101/279) and catching up again from the new LEO."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.records import iter_batches
from kafkapy.storage import LogConfig, PartitionLog
from tests.storage.helpers import BASE_TS, batch

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def _lead(plog: PartitionLog, epoch: int, batches: int, size: int = 3, tag: bytes = b"") -> None:
    for i in range(batches):
        plog.append(batch([b"%s-e%d-%d-%d" % (tag, epoch, i, j) for j in range(size)]),
                    now_ms=BASE_TS, leader_epoch=epoch)


def _everything(plog: PartitionLog) -> bytes:
    if plog.log_end_offset == plog.log_start_offset:
        return b""
    return plog.read_bytes(plog.log_start_offset, 1 << 30)


def _catch_up(follower: PartitionLog, leader: PartitionLog, max_bytes: int = 700) -> int:
    """Fetch from the follower's LEO until it reaches the leader's; returns the fetch count."""
    fetches = 0
    for fetches in range(1, 10_000):  # noqa: B007
        if follower.log_end_offset >= leader.log_end_offset:
            break
        if follower.log_end_offset < leader.log_start_offset:
            follower.truncate_fully(leader.log_start_offset)
            continue
        follower.append_as_follower(leader.read_bytes(follower.log_end_offset, max_bytes))
    return fetches


def _reconcile(follower: PartitionLog, leader: PartitionLog) -> None:
    """KIP-279: ask the leader where the follower's latest epoch ends, truncate there, repeat
    with the epoch the leader answered until both agree (bounded)."""
    for _ in range(100):
        epoch = follower.leader_epochs.latest_epoch
        if epoch < 0:
            return
        leader_epoch, leader_end = leader.leader_epochs.end_offset_for(epoch, leader.log_end_offset)
        if leader_epoch == -1:
            follower.truncate_fully(follower.log_start_offset)
            return
        if leader_epoch == epoch:
            follower.truncate_to(min(leader_end, follower.log_end_offset))
            return
        # the leader never had this epoch: cut at the end of the leader's epoch in our log
        _, own_end = follower.leader_epochs.end_offset_for(leader_epoch, follower.log_end_offset)
        follower.truncate_to(min(leader_end, own_end))
    raise AssertionError("reconciliation did not settle")


def test_follower_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "l-0", SMALL)
    _lead(leader, 1, 3)
    _lead(leader, 4, 2)
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    _catch_up(follower, leader)
    assert _everything(follower) == _everything(leader)
    assert follower.leader_epochs.entries == [(1, 0), (4, 9)]
    assert follower.leader_epochs.end_offset_for(1, follower.log_end_offset) == (1, 9)
    assert follower.leader_epochs.end_offset_for(3, follower.log_end_offset) == (1, 9)
    assert follower.leader_epochs.end_offset_for(9, follower.log_end_offset) == (4, 15)
    assert follower.leader_epochs.end_offset_for(0, follower.log_end_offset) == (0, 0)  # before history
    epochs = [h.partition_leader_epoch for _, h in iter_batches(_everything(follower))]
    assert epochs == [1, 1, 1, 4, 4]
    follower.close()
    again = PartitionLog(tmp_path / "f-0", SMALL, clean_shutdown=True)
    assert again.leader_epochs.entries == [(1, 0), (4, 9)]


def test_truncation_inside_a_batch_refetches_that_batch(tmp_path: Path) -> None:
    """A batch straddling the truncation point goes whole; the LEO lands at its base and the
    next fetch from there brings it back intact."""
    leader = PartitionLog(tmp_path / "l-0", SMALL)
    _lead(leader, 1, 4)  # offsets 0-11 in batches of 3
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    _catch_up(follower, leader)
    follower.high_watermark = 12
    follower.truncate_to(7)  # inside batch 6-8
    assert follower.log_end_offset == 6
    assert follower.high_watermark == 6
    assert follower.leader_epochs.entries == [(1, 0)]
    first = next(iter_batches(leader.read_bytes(follower.log_end_offset, 1)))[1]
    assert first.base_offset == 6
    _catch_up(follower, leader, max_bytes=1)
    assert _everything(follower) == _everything(leader)


def test_truncation_at_a_segment_boundary_keeps_the_log_writable(tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "l-0", SMALL)
    _lead(leader, 2, 40)
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    _catch_up(follower, leader)
    assert len(follower.segments) > 2
    boundary = follower.segments[2].base_offset
    follower.truncate_to(boundary)
    assert follower.log_end_offset == boundary
    assert len(follower.segments) == 2
    _lead(leader, 3, 2)
    _catch_up(follower, leader)
    assert _everything(follower) == _everything(leader)
    follower.close()
    again = PartitionLog(tmp_path / "f-0", SMALL, clean_shutdown=False)
    assert _everything(again) == _everything(leader)
    assert again.leader_epochs.entries == leader.leader_epochs.entries


def test_follower_behind_the_leader_log_start_restarts_there(tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "l-0", SMALL)
    _lead(leader, 1, 10)
    leader.high_watermark = leader.log_end_offset
    leader.delete_records_before(14)
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    _catch_up(follower, leader)
    assert follower.log_start_offset == 14
    assert follower.log_end_offset == leader.log_end_offset
    # the batch holding 14 starts at 12: the follower keeps it whole
    assert _everything(follower)[: 8] == leader.read_bytes(14, 1)[: 8]
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(1, 14)]


def test_follower_log_start_follows_the_leader(tmp_path: Path) -> None:
    follower = PartitionLog(tmp_path / "f-0", SMALL)
    _lead(follower, 1, 40)
    assert len(follower.segments) > 2
    assert follower.follow_log_start(50) == 50
    assert follower.segments[0].base_offset <= 50
    assert follower.high_watermark >= 50
    assert follower.follow_log_start(10) == 50  # never backwards
    assert follower.follow_log_start(10_000) == follower.log_end_offset  # never past the LEO


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    common=st.lists(st.integers(1, 3), min_size=0, max_size=4),
    own=st.integers(0, 4),
    replicated=st.integers(0, 4),
    new=st.lists(st.integers(1, 3), min_size=0, max_size=3),
    cut_inside=st.booleans(),
)
def test_a_diverged_follower_converges_on_the_leader(
    common: list[int], own: int, replicated: int, new: list[int], cut_inside: bool
) -> None:
    """Shared history, then the follower leads an epoch alone (some of it reaching the new
    leader), then the new leader writes later epochs: reconciling by leader epochs and
    fetching from the new LEO leaves the follower byte-identical to the leader."""
    tmp = Path(tempfile.mkdtemp(prefix="kafkapy-follower-"))
    try:
        leader = PartitionLog(tmp / "l-0", SMALL)
        follower = PartitionLog(tmp / "f-0", SMALL)
        epoch = 0
        for count in common:
            epoch += 1
            _lead(leader, epoch, count)
        _catch_up(follower, leader)
        epoch += 1  # the follower leads this epoch; the leader got `replicated` of its batches
        _lead(follower, epoch, own, size=2 if cut_inside else 3, tag=b"old")
        start = leader.log_end_offset
        for i in range(min(own, replicated)):
            data = follower.read_bytes(start, 1)
            leader.append_as_follower(data)
            start = leader.log_end_offset
            del i
        for count in new:
            epoch += 1
            _lead(leader, epoch, count, tag=b"new")
        _reconcile(follower, leader)
        assert follower.log_end_offset <= leader.log_end_offset
        if follower.log_end_offset:
            prefix = follower.read_bytes(0, 1 << 30)
            assert leader.read_bytes(0, len(prefix) + 1)[: len(prefix)] == prefix
        _catch_up(follower, leader)
        assert _everything(follower) == _everything(leader)
        assert follower.leader_epochs.entries == leader.leader_epochs.entries
        follower.close()
        leader.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
