"""Local retention of a tiered topic (KIP-405): `local.retention.*` over copied segments only,
so nothing acknowledged exists nowhere but in a deleted file."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.storage import LogConfig, PartitionLog
from tests.storage.helpers import BASE_TS, batch

SEGMENT = 2000


def _log(directory: Path, **configs: str) -> PartitionLog:
    settings = {"segment.bytes": str(SEGMENT), "retention.ms": "1000", **configs}
    plog = PartitionLog(directory, LogConfig.from_topic_configs(settings), now_ms=BASE_TS)
    for i in range(20):
        plog.append(batch([b"v" * 400], ts=BASE_TS + i), now_ms=BASE_TS, leader_epoch=0)
    plog.high_watermark = plog.log_end_offset
    return plog


def test_nothing_uncopied_goes_even_past_retention(tmp_path: Path) -> None:
    plog = _log(tmp_path / "t-0", **{"remote.storage.enable": "true"})
    before = [s.base_offset for s in plog.segments]
    assert plog.delete_old_segments(BASE_TS + 10**9) == 0
    assert [s.base_offset for s in plog.segments] == before
    assert plog.log_start_offset == 0


def test_copied_segments_go_by_local_retention_up_to_the_copied_offset(tmp_path: Path) -> None:
    plog = _log(tmp_path / "t-0", **{"remote.storage.enable": "true", "retention.ms": "-1",
                                    "local.retention.bytes": "0"})
    third = plog.segments[2].base_offset
    plog.remote_copied_offset = third - 1  # the first two segments are remote
    assert plog.delete_old_segments(BASE_TS) == 2
    assert plog.segments[0].base_offset == third
    assert plog.log_start_offset == third


def test_local_retention_minus_two_means_the_total_retention(tmp_path: Path) -> None:
    plog = _log(tmp_path / "t-0", **{"remote.storage.enable": "true"})
    plog.remote_copied_offset = plog.segments[-1].base_offset - 1
    plog.delete_old_segments(BASE_TS + 10**9)  # retention.ms=1000 long passed
    assert len(plog.segments) == 1


def test_an_untiered_log_keeps_kafkas_retention(tmp_path: Path) -> None:
    plog = _log(tmp_path / "t-0")
    plog.delete_old_segments(BASE_TS + 10**9)
    assert len(plog.segments) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.integers(1, 30), copied=st.integers(-1, 40), local_bytes=st.integers(0, 12_000),
       later_ms=st.sampled_from([0, 10**9]))
def test_local_retention_never_passes_the_copied_offset(
        tmp_path_factory: pytest.TempPathFactory, batches: int, copied: int, local_bytes: int,
        later_ms: int) -> None:
    directory = tmp_path_factory.mktemp("tiered") / "t-0"
    plog = PartitionLog(directory, LogConfig.from_topic_configs({
        "segment.bytes": str(SEGMENT), "retention.ms": "1000", "remote.storage.enable": "true",
        "local.retention.bytes": str(local_bytes)}), now_ms=BASE_TS)
    for i in range(batches):
        plog.append(batch([b"v" * 400], ts=BASE_TS + i), now_ms=BASE_TS, leader_epoch=0)
    plog.high_watermark = plog.log_end_offset
    plog.remote_copied_offset = copied
    plog.delete_old_segments(BASE_TS + later_ms)
    # every offset past the copied one is still local, and the active segment always stays
    assert plog.log_start_offset <= max(copied + 1, 0)
    assert plog.segments[-1].next_offset == plog.log_end_offset == batches
    plog.close()
