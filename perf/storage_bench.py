"""Log store throughput next to the disk's own sequential write speed (`dd`), same disk.

Figures (printed, and written to perf/results/storage_bench.json):

- `dd_fdatasync_mb_s`: `dd bs=1M conv=fdatasync` - what the disk sustains to stable storage.
- `dd_cached_mb_s`: `dd bs=1M` without sync - the page-cache write ceiling.
- `append_<size>_mb_s`: `PartitionLog.append` of pre-built 16 KiB / 1 MiB batches (full CRC32C
  validation, offset assignment, index upkeep) without fsync, timed *including* a final
  `flush()`, so the data is on disk like dd's; `..._cached_mb_s` is the same without the flush.
- `append_<size>_fsync_mb_s`: `flush()` (fsync) after every append: the `flush.messages=1` path.
- `read_bytes_mb_s` / `read_sendfile_mb_s`: sequential reads by offset of the whole log from the
  page cache, 1 MiB per read, via `read_bytes` (copy) and via `read` + `os.sendfile` to
  /dev/null (the server's path).
- `read_lookup_us`: one `read(offset, 1 MiB)` at a random offset, slices only (index binary
  search + short header scan + trimming to whole batches), in microseconds.

Target (issue 3): appends without fsync >= 70% of dd's speed measured in the same run. Each
round runs dd and then the appends, `--runs` rounds alternate, medians are reported (ratios are
per round, then the median), so a shared machine's drift hits both sides alike.

Run: .venv/bin/python perf/storage_bench.py [--mib N] [--dir PATH] [--fsync-appends N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkapy.protocol.records import Record, build_batch
from kafkapy.storage import LogConfig, PartitionLog

RESULTS = Path(__file__).resolve().parent / "results" / "storage_bench.json"
NOW_MS = 1_700_000_000_000


def dd_speed(directory: Path, mib: int, *, sync: bool) -> float:
    """MB/s reported by dd writing `mib` MiB of zeros (parsed from its summary line)."""
    target = directory / "dd.bin"
    cmd = ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mib}"]
    if sync:
        cmd.append("conv=fdatasync")
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    elapsed = time.perf_counter() - started
    target.unlink()
    match = re.search(r"copied, ([\d.]+) s", out.stderr)
    seconds = float(match.group(1)) if match else elapsed
    return mib * 1024 * 1024 / seconds / 1e6


def make_batch(size: int) -> bytes:
    """One uncompressed batch of about `size` bytes: 1 KiB records of random bytes."""
    value_size = 1024
    count = max(1, size // (value_size + 16))
    records = [Record(offset_delta=i, timestamp_delta=0, key=None,
                      value=os.urandom(value_size)) for i in range(count)]
    return build_batch(records, base_timestamp=NOW_MS)


def append_run(directory: Path, batch: bytes, total_bytes: int, *, fsync_each: bool
               ) -> dict[str, float]:
    shutil.rmtree(directory, ignore_errors=True)
    plog = PartitionLog(directory, LogConfig(segment_bytes=1 << 30))
    n = max(1, total_bytes // len(batch))
    started = time.perf_counter()
    for _ in range(n):
        plog.append(batch, now_ms=NOW_MS)
        if fsync_each:
            plog.flush()
    cached = time.perf_counter() - started
    plog.flush()
    synced = time.perf_counter() - started
    size = n * len(batch)
    plog.close()
    return {"bytes": size, "appends": n, "cached_mb_s": size / cached / 1e6,
            "synced_mb_s": size / synced / 1e6}


def read_run(directory: Path) -> dict[str, float]:
    plog = PartitionLog(directory, LogConfig(segment_bytes=1 << 30), clean_shutdown=True)
    leo = plog.log_end_offset

    def sweep(use_sendfile: bool) -> tuple[int, float]:
        offset, total = 0, 0
        devnull = os.open(os.devnull, os.O_WRONLY)
        started = time.perf_counter()
        try:
            for _ in range(10_000_000):
                if offset >= leo:
                    break
                result = plog.read(offset, 1 << 20)
                for s in result.slices:
                    if use_sendfile:
                        sent = 0
                        while sent < s.length:
                            sent += os.sendfile(devnull, s.fd, s.position + sent, s.length - sent)
                    else:
                        _ = s.read()
                    total += s.length
                offset = _last_offset_of(plog, result) + 1
        finally:
            os.close(devnull)
        return total, time.perf_counter() - started

    sweep(False)  # warm the page cache
    copied, t_copy = sweep(False)
    sent, t_send = sweep(True)
    rnd = random.Random(7)
    probes = [rnd.randrange(leo) for _ in range(2000)]
    started = time.perf_counter()
    for offset in probes:
        plog.read(offset, 1 << 20)
    lookup_us = (time.perf_counter() - started) / len(probes) * 1e6
    plog.close()
    return {"read_bytes_mb_s": copied / t_copy / 1e6, "read_sendfile_mb_s": sent / t_send / 1e6,
            "read_lookup_us": lookup_us}


def _last_offset_of(plog: PartitionLog, result: Any) -> int:
    """Last offset in a read: parse the header of the slice's final batch (per batch, cheap)."""
    from kafkapy.protocol.records import parse_batch_header

    s = result.slices[-1]
    seg = next(seg for seg in plog.segments if seg.fd == s.fd)
    end = s.position + s.length
    last = seg.batch_boundary_at_or_before(end, s.position)
    assert last == end
    pos = s.position
    header = None
    while pos < end:
        header = parse_batch_header(os.pread(s.fd, 61, pos))
        pos += header.size
    assert header is not None
    return header.last_offset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB written per append run")
    parser.add_argument("--runs", type=int, default=3,
                        help="alternating dd/append rounds; medians are reported")
    parser.add_argument("--fsync-appends", type=int, default=100,
                        help="appends in each fsync-per-append run")
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a "
                        "temp dir under the working directory's filesystem)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    base = Path(tempfile.mkdtemp(prefix="storage-bench-", dir=args.dir or Path.cwd()))
    total = args.mib * 1024 * 1024
    figures: dict[str, Any] = {"mib": args.mib, "runs": args.runs,
                               "machine": platform.platform(), "cpus": os.cpu_count()}
    rounds: list[dict[str, float]] = []
    try:
        batches = {"16k": make_batch(16 * 1024), "1m": make_batch(1024 * 1024)}
        for _ in range(args.runs):
            # dd and the appends alternate so drift of a shared machine hits both alike
            one: dict[str, float] = {}
            one["dd_fdatasync_mb_s"] = dd_speed(base, args.mib, sync=True)
            one["dd_cached_mb_s"] = dd_speed(base, args.mib, sync=False)
            for label, batch in batches.items():
                run = append_run(base / f"a{label}-0", batch, total, fsync_each=False)
                one[f"append_{label}_mb_s"] = run["synced_mb_s"]
                one[f"append_{label}_cached_mb_s"] = run["cached_mb_s"]
                one[f"append_{label}_vs_dd"] = run["synced_mb_s"] / one["dd_fdatasync_mb_s"]
                fs = append_run(base / f"f{label}-0", batch, args.fsync_appends * len(batch),
                                fsync_each=True)
                one[f"append_{label}_fsync_mb_s"] = fs["cached_mb_s"]
                one[f"append_{label}_fsync_per_s"] = fs["appends"] / (
                    fs["bytes"] / fs["cached_mb_s"] / 1e6)
            one.update(read_run(base / "a1m-0"))
            rounds.append(one)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    for key in rounds[0]:
        figures[key] = statistics.median(r[key] for r in rounds)
    figures["rounds"] = rounds
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        if key == "rounds":
            continue
        shown = f"{value:,.2f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {shown}")
    ok = min(figures["append_16k_vs_dd"], figures["append_1m_vs_dd"]) >= 0.7
    print(f"target (median appends without fsync >= 70% of median per-round dd "
          f"conv=fdatasync): {'met' if ok else 'NOT met'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
