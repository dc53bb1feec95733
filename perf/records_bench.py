"""Record-batch and compression micro-benchmarks.

Prints per-operation figures and writes them to perf/results/records_bench.json. The point to
watch is `validate_1mib` against `crc32c_raw_1mib`: parsing a header and validating a batch must
cost about one CRC32C pass over the bytes (plus constant per-batch Python), never per record.

Run: .venv/bin/python perf/records_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import crc32c
from construct import Int8sb, Int16sb, Int32sb, Int32ub, Int64sb, Struct

from kafkapy.protocol.compression import Compression, compress, decompress
from kafkapy.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batches,
    parse_batch_header,
    set_base_offset,
    set_max_timestamp,
    validate_batch,
)

RESULTS = Path(__file__).parent / "results" / "records_bench.json"
WORDS = [b"kafka", b"broker", b"partition", b"offset", b"record", b"batch", b"topic", b"trio",
         b"leader", b"epoch", b"12345", b"{\"id\":", b"\"value\":", b"}", b" ", b"\n"]


def _value(rng: random.Random, size: int) -> bytes:
    """Log-like text: compressible as real payloads are, not as trivially as zeros."""
    out = bytearray()
    while len(out) < size:
        out += rng.choice(WORDS)
        if rng.random() < 0.2:
            out += b"%d" % rng.randrange(10**9)
    return bytes(out[:size])


def _records(count: int, size: int) -> list[Record]:
    rng = random.Random(2024)
    return [
        Record(i, i, b"key-%d" % i, _value(rng, size), [("trace", b"%08x" % i)])
        for i in range(count)
    ]


def _time(fn: Callable[[], object], *, inner: int, repeat: int) -> float:
    """Median seconds per call over `repeat` runs of `inner` calls."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - start) / inner / 1e9)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    repeat = args.repeat
    results: dict[str, dict[str, float]] = {}

    def report(name: str, seconds: float, nbytes: int | None = None, **extra: float) -> None:
        entry: dict[str, float] = {"us": seconds * 1e6, **extra}
        line = f"{name:<34} {seconds * 1e6:12.2f} us"
        if nbytes:
            entry["gb_per_s"] = nbytes / seconds / 1e9
            line += f"  {entry['gb_per_s']:8.3f} GB/s"
        for key, value in extra.items():
            line += f"  {key}={value:.3f}"
        print(line)
        results[name] = entry

    records = _records(1000, 1024)
    batch = build_batch(records, base_timestamp=1_700_000_000_000)
    size = len(batch)
    buf = bytearray(batch)
    view = memoryview(buf)
    print(f"batch: {len(records)} records x 1 KiB = {size} bytes uncompressed")

    report("crc32c_raw_1mib", _time(lambda: crc32c.crc32c(view[21:]), inner=20, repeat=repeat),
           size)

    def header_and_crc() -> None:
        validate_batch(view, 0, parse_batch_header(view, 0))

    seconds = _time(header_and_crc, inner=20, repeat=repeat)
    crc = results["crc32c_raw_1mib"]["us"] / 1e6
    report("validate_1mib", seconds, size, crc_ratio=seconds / crc)
    report("parse_header", _time(lambda: parse_batch_header(view, 0), inner=10000, repeat=repeat))
    # Why records.py uses struct: the same 61-byte header with construct, compiled.
    compiled = Struct(
        "base_offset" / Int64sb, "batch_length" / Int32sb, "partition_leader_epoch" / Int32sb,
        "magic" / Int8sb, "crc" / Int32ub, "attributes" / Int16sb, "last_offset_delta" / Int32sb,
        "base_timestamp" / Int64sb, "max_timestamp" / Int64sb, "producer_id" / Int64sb,
        "producer_epoch" / Int16sb, "base_sequence" / Int32sb, "records_count" / Int32sb,
    ).compile()
    head = bytes(view[:61])
    report("construct_compiled_header", _time(lambda: compiled.parse(head), inner=10000,
                                              repeat=repeat))
    report("iter_batches_1", _time(lambda: list(iter_batches(view)), inner=5000, repeat=repeat))
    report("set_base_offset", _time(lambda: set_base_offset(view, 0, 123456), inner=10000,
                                    repeat=repeat))
    report("set_max_timestamp_1mib", _time(lambda: set_max_timestamp(view, 0, 1, True), inner=20,
                                           repeat=repeat), size)
    build = _time(lambda: build_batch(records, base_timestamp=0), inner=3, repeat=repeat)
    report("build_batch_1000x1KiB", build, per_record_us=build * 1e6 / len(records))
    header = parse_batch_header(batch)
    dec = _time(lambda: decode_records(batch, 0, header), inner=3, repeat=repeat)
    report("decode_records_1000x1KiB", dec, per_record_us=dec * 1e6 / len(records))

    # Many small batches, as a produce request of 16 partitions x 64 KiB carries.
    small = build_batch(_records(64, 1000), base_timestamp=0)
    many = memoryview(small * 16)

    def validate_all() -> None:
        for pos, hdr in iter_batches(many):
            validate_batch(many, pos, hdr)

    report("validate_16x64KiB", _time(validate_all, inner=20, repeat=repeat), len(many))

    region = bytes(view[61:])
    for codec in list(Compression)[1:]:
        packed = compress(codec, region)
        name = codec.name.lower()
        report(f"compress_{name}", _time(lambda c=codec: compress(c, region), inner=3,
                                         repeat=repeat), len(region),
               ratio=len(region) / len(packed))
        report(f"decompress_{name}", _time(lambda c=codec, p=packed: decompress(c, p, 1 << 26),
                                           inner=5, repeat=repeat), len(region))
        cbatch = build_batch(records, base_timestamp=0, compression=codec)
        cheader = parse_batch_header(cbatch)
        report(f"decode_records_{name}", _time(lambda b=cbatch, h=cheader: decode_records(b, 0, h),
                                                inner=3, repeat=repeat))

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "batch_bytes": size,
        "repeat": repeat,
        "results": results,
    }, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
