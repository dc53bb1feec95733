"""Kafka's record-level LogValidator rules on client appends (kafkapy/storage/validator.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import records as records_module
from kafkapy.protocol.errors import ErrorCode, RecordValidationError
from kafkapy.protocol.records import (
    Compression,
    Record,
    build_batch,
    iter_batches,
    validate_batch,
)
from kafkapy.storage import LogConfig, PartitionLog
from tests.storage.helpers import BASE_TS, batch

pytestmark = pytest.mark.timeout(60)

COMPACTED = LogConfig(cleanup_policy="compact")
NOW = BASE_TS + 1_000


def _log(tmp_path: Path, config: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", config)


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_compacted_topic_refuses_keyless_records_naming_them(tmp_path: Path, policy: str) -> None:
    plog = _log(tmp_path, LogConfig(cleanup_policy=policy))
    data = batch([b"a", b"b", b"c"], keys=[b"k", None, None])
    with pytest.raises(RecordValidationError) as info:
        plog.append(data, now_ms=NOW)
    assert info.value.error_code is ErrorCode.INVALID_RECORD
    assert [i for i, _ in info.value.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key" in info.value.record_errors[0][1]
    assert plog.log_end_offset == 0  # nothing of the batch was written


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_compacted_topic_checks_keys_inside_compressed_batches(tmp_path: Path, codec: Compression) -> None:
    plog = _log(tmp_path, COMPACTED)
    keyless = build_batch([Record(0, 0, None, b"v")], base_timestamp=BASE_TS, compression=codec)
    with pytest.raises(RecordValidationError):
        plog.append(keyless, now_ms=NOW)
    keyed = build_batch([Record(0, 0, b"k", None)], base_timestamp=BASE_TS, compression=codec)
    assert plog.append(keyed, now_ms=NOW).base_offset == 0  # a tombstone has a key: accepted


def test_delete_topic_accepts_keyless_records(tmp_path: Path) -> None:
    plog = _log(tmp_path)
    assert plog.append(batch([b"a", b"b"]), now_ms=NOW).last_offset == 1


@pytest.mark.parametrize("header_max", [-1, 0, BASE_TS - 5])
def test_unset_header_max_timestamp_is_recomputed_from_the_records(
    tmp_path: Path, header_max: int
) -> None:
    """Older Go clients leave maxTimestamp unset: the log indexes the records' real maximum,
    so a timestamp lookup finds them (it answered nothing before)."""
    plog = _log(tmp_path)
    records = [Record(i, delta, None, b"v") for i, delta in enumerate([0, 30, 10])]
    data = build_batch(records, base_timestamp=BASE_TS, max_timestamp=header_max)
    plog.append(data, now_ms=NOW)
    assert plog.offset_for_timestamp(BASE_TS + 20) == (1, BASE_TS + 30)
    assert plog.max_timestamp_offset() == (1, BASE_TS + 30)
    stored = plog.read_bytes(0, 1 << 20)
    for pos, header in iter_batches(stored):
        assert header.max_timestamp == BASE_TS + 30
        validate_batch(stored, pos, header)  # the CRC was rewritten with the header


def test_records_are_walked_as_bytes_never_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path walks the records' bytes: no `Record` object is built for an append,
    compacted (keys checked) or not."""

    def no_decoding(*_: object, **__: object) -> None:
        raise AssertionError("records decoded on the produce path")

    plain = batch([b"a", b"b", b"c"], ts=NOW - 5)
    keyed = batch([b"a", b"b"], keys=[b"k", b"l"], ts=NOW - 5)
    monkeypatch.setattr(records_module, "decode_records", no_decoding)
    monkeypatch.setattr(Record, "__init__", no_decoding)
    plog = _log(tmp_path)
    plog.append(plain, now_ms=NOW)
    assert plog.log_end_offset == 3
    compacted = _log(tmp_path / "c", COMPACTED)
    compacted.append(keyed, now_ms=NOW)
    assert compacted.log_end_offset == 2


def test_log_append_time_topic_does_not_judge_client_timestamps(tmp_path: Path) -> None:
    plog = _log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    data = build_batch([Record(0, 0, None, b"v")], base_timestamp=NOW + 10**9, max_timestamp=-1)
    assert plog.append(data, now_ms=NOW).log_append_time_ms == NOW


def test_timestamp_after_max_refuses_future_records(tmp_path: Path) -> None:
    plog = _log(tmp_path, LogConfig(message_timestamp_after_max_ms=1_000))
    records = [Record(0, 0, None, b"ok"), Record(1, 5_000, None, b"future")]
    with pytest.raises(RecordValidationError) as info:
        plog.append(build_batch(records, base_timestamp=NOW), now_ms=NOW)
    assert info.value.error_code is ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in info.value.record_errors] == [1]
    assert plog.log_end_offset == 0


def test_default_after_max_is_kafkas_one_hour(tmp_path: Path) -> None:
    plog = _log(tmp_path)
    plog.append(batch([b"a"], ts=NOW + 3_600_000), now_ms=NOW)
    with pytest.raises(RecordValidationError):
        plog.append(batch([b"b"], ts=NOW + 3_600_001), now_ms=NOW)


def test_timestamp_before_max_refuses_old_records_even_below_the_base(tmp_path: Path) -> None:
    """The smallest timestamp is not in the header (deltas may be negative): with a finite
    before.max.ms the records are read."""
    plog = _log(tmp_path, LogConfig(message_timestamp_before_max_ms=1_000))
    records = [Record(0, 0, None, b"ok"), Record(1, -5_000, None, b"old")]
    with pytest.raises(RecordValidationError) as info:
        plog.append(build_batch(records, base_timestamp=NOW), now_ms=NOW)
    assert [i for i, _ in info.value.record_errors] == [1]
    plog.append(build_batch(records[:1], base_timestamp=NOW - 999), now_ms=NOW)


@given(
    deltas=st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=8),
    header_max=st.sampled_from([-1, 0, None]),
    keyed=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_stored_max_timestamp_is_the_records_maximum(
    tmp_path_factory: pytest.TempPathFactory, deltas: list[int], header_max: int | None, keyed: bool
) -> None:
    plog = _log(tmp_path_factory.mktemp("v"), COMPACTED if keyed else LogConfig())
    records = [Record(i, d, b"k" if keyed else None, b"v") for i, d in enumerate(deltas)]
    data = build_batch(records, base_timestamp=NOW, max_timestamp=header_max)
    plog.append(data, now_ms=NOW)
    stored = plog.read_bytes(0, 1 << 20)
    [(_, header)] = list(iter_batches(stored))
    assert header.max_timestamp == NOW + max(deltas)
    plog.close()
