"""Crash recovery: torn tails, flipped bytes and a SIGKILLed appender.

What users rely on: after any crash, reopening keeps exactly the complete, valid prefix of the
log (every batch whose CRC holds, in offset order), drops everything after the first damage,
and the log accepts appends again at the right offset.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.records import iter_batches
from kafkapy.storage import LogConfig, PartitionLog
from tests.storage.helpers import BASE_TS, batch, records_of

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=128)
ROOT = Path(__file__).resolve().parents[2]


def build_log(path: Path, n: int = 40) -> list[tuple[int, int, int]]:
    """A closed log of `n` two-record batches; returns (segment base, position, size) per batch."""
    plog = PartitionLog(path, CONFIG)
    for i in range(n):
        plog.append(batch([b"a%03d" % i, b"b%03d" % i]), now_ms=BASE_TS)
    layout = []
    for seg in plog.segments:
        data = seg.log_path.read_bytes()
        layout += [(seg.base_offset, pos, h.size) for pos, h in iter_batches(data)]
    plog.close()
    return layout


def values(plog: PartitionLog) -> list[bytes | None]:
    out: list[bytes | None] = []
    offset = plog.log_start_offset
    for _ in range(10_000):
        if offset >= plog.log_end_offset:
            break
        recs = records_of(plog.read_bytes(offset, 1 << 20))
        out += [v for _, _, v in recs]
        offset = recs[-1][0] + 1
    return out


def expected_values(batches: int) -> list[bytes | None]:
    return [v for i in range(batches) for v in (b"a%03d" % i, b"b%03d" % i)]


def seg_path(directory: Path, base: int) -> Path:
    return directory / f"{base:020d}.log"


@pytest.mark.timeout(120)
def test_cut_at_every_byte_of_the_last_batches(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    layout = build_log(pristine)
    last_base = layout[-1][0]
    tail = [b for b in layout if b[0] == last_base][-3:]
    first_batch = layout.index(tail[0])
    start, end = tail[0][1], tail[-1][1] + tail[-1][2]
    snapshot = {p.name: p.read_bytes() for p in pristine.iterdir()}
    work = tmp_path / "work"
    work.mkdir()
    for cut in range(start, end):
        for p in work.iterdir():
            p.unlink()
        for name, content in snapshot.items():
            (work / name).write_bytes(content)
        os.truncate(seg_path(work, last_base), cut)
        plog = PartitionLog(work, CONFIG)  # unclean: recovery from the recovery point
        complete = first_batch + sum(1 for b in tail if b[1] + b[2] <= cut)
        assert plog.log_end_offset == 2 * complete, cut
        assert values(plog) == expected_values(complete)
        assert plog.append(batch([b"after"]), now_ms=BASE_TS).base_offset == 2 * complete
        plog.close()
        again = PartitionLog(work, CONFIG, clean_shutdown=True)
        assert values(again) == [*expected_values(complete), b"after"]
        again.close()


def test_cut_inside_an_older_segment_drops_later_segments(tmp_path: Path) -> None:
    layout = build_log(tmp_path / "t-0", n=70)
    bases = sorted({b[0] for b in layout})
    assert len(bases) >= 3
    middle = [b for b in layout if b[0] == bases[1]]
    cut_batch = middle[2]
    os.truncate(seg_path(tmp_path / "t-0", bases[1]), cut_batch[1] + 5)
    (tmp_path / "t-0" / "offsets.checkpoint").unlink()  # no recovery point: scan everything
    plog = PartitionLog(tmp_path / "t-0", CONFIG)
    complete = layout.index(cut_batch)
    assert values(plog) == expected_values(complete)
    assert [s.base_offset for s in plog.segments] == bases[:2]
    assert not seg_path(tmp_path / "t-0", bases[2]).exists()


# Bytes not covered by the CRC: baseOffset (0-7) and partitionLeaderEpoch (12-15), by design
# of the v2 format (the broker rewrites them); a flip there is not detectable by recovery.
_UNCHECKED = set(range(8)) | set(range(12, 16))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_flipped_bytes_keep_exactly_the_valid_prefix(tmp_path: Path, data: st.DataObject) -> None:
    pristine = tmp_path / "pristine-flip"
    if not pristine.exists():
        build_log(pristine, n=12)
    layout = [b for b in _layout(pristine)]
    k = data.draw(st.integers(0, len(layout) - 1), label="batch")
    base, pos, size = layout[k]
    within = data.draw(st.sampled_from([i for i in range(size) if i not in _UNCHECKED]),
                       label="byte")
    mask = data.draw(st.integers(1, 255), label="mask")
    work = tmp_path / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(pristine, work)
    (work / "offsets.checkpoint").unlink()
    path = seg_path(work, base)
    raw = bytearray(path.read_bytes())
    raw[pos + within] ^= mask
    path.write_bytes(bytes(raw))
    plog = PartitionLog(work, CONFIG)
    assert values(plog) == expected_values(k)
    assert plog.log_end_offset == 2 * k
    plog.close()


def _layout(path: Path) -> list[tuple[int, int, int]]:
    out = []
    for seg in sorted(path.glob("*.log")):
        data = seg.read_bytes()
        out += [(int(seg.stem), pos, h.size) for pos, h in iter_batches(data)]
    return out


_CHILD = """
import sys
from kafkapy.storage import LogConfig, PartitionLog
from tests.storage.helpers import batch
plog = PartitionLog(sys.argv[1], LogConfig(segment_bytes=4096, index_interval_bytes=256))
start = int(sys.argv[2])
for i in range(start, start + 1_000_000):
    value = b"v%d" % i
    result = plog.append(batch([value, value + b"!"]), now_ms=1_700_000_000_000)
    sys.stdout.write(f"{result.base_offset} {i}\\n")
    sys.stdout.flush()
"""


def _run_and_kill(directory: Path, start: int, min_lines: int) -> list[tuple[int, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(directory), str(start)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    buf = b""
    deadline = time.monotonic() + 40  # generous: the machine may be shared and slow
    try:
        while buf.count(b"\n") < min_lines and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=10)
    buf += rest
    assert proc.returncode == -signal.SIGKILL, err.decode()
    lines = buf.split(b"\n")[:-1]  # a last line without newline was cut by the kill
    return [(int(a), int(b)) for a, b in (line.split() for line in lines)]


@pytest.mark.timeout(120)
def test_sigkilled_appender_loses_no_acknowledged_append(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    acked = _run_and_kill(directory, 0, min_lines=300)
    assert acked, "the child acknowledged appends before it was killed"
    second = _run_and_kill(directory, 10_000, min_lines=300)  # recovers, appends, dies again
    assert second
    acked += second
    plog = PartitionLog(directory, CONFIG)
    stored: dict[int, bytes | None] = {}
    offset = plog.log_start_offset
    for _ in range(100_000):
        if offset >= plog.log_end_offset:
            break
        recs = records_of(plog.read_bytes(offset, 1 << 20))
        stored.update({o: v for o, _, v in recs})
        offset = recs[-1][0] + 1
    offsets = sorted(stored)
    assert offsets == list(range(len(offsets)))  # dense, in order, no duplicates
    for base, i in acked:
        assert stored[base] == b"v%d" % i
        assert stored[base + 1] == b"v%d!" % i
    assert [i for _, i in sorted(acked)] == [i for _, i in acked]
