"""Protocol codec micro-benchmarks (issue 2 figures).

Prints per-operation cost (median over several runs) and writes perf/results/protocol_bench.json:

* `decode_produce_v9_4x64k` / `_v11`: decode_request of a Produce request carrying 4 partitions
  of 64 KiB record batches; `decode_produce_v11_4x1m` the same with 1 MiB batches, which must
  cost the same (records are zero-copy views of the frame, never walked);
* `encode_fetch_resp_100p`: encode_response of a Fetch v12+ response for 100 partitions
  (headers and metadata of each partition; small record sets);
* `batch_header_crc_1mib`: parse a batch header and verify CRC32C of a 1 MiB batch, next to the
  raw crc32c pass it should be bounded by;
* the interpreted (uncompiled) codec for the same Produce decode, to show what compiling buys.

Run: .venv/bin/python perf/protocol_bench.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from kafkapy.protocol import RequestHeader, decode_request, encode_request, encode_response
from kafkapy.protocol.codec import decode_body, encode_body
from kafkapy.protocol.messages import FetchResponse, ProduceRequest

RESULTS = Path(__file__).parent / "results" / "protocol_bench.json"


def _time_op(fn: Callable[[], object], repeat: int, min_seconds: float = 0.2) -> float:
    """Median seconds per call over `repeat` runs, each long enough to be measurable."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= min_seconds / 4 or n >= 1 << 20:
            break
        n *= 2
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def _batch(size: int) -> bytes:
    """A real v2 batch of about `size` bytes when records.py is available, else opaque bytes."""
    try:
        from kafkapy.protocol.records import Record, build_batch
    except ImportError:
        return bytes(size)
    value = b"x" * 1000
    count = max(1, size // (len(value) + 12))
    records = [Record(offset_delta=i, value=value) for i in range(count)]
    return build_batch(records, base_timestamp=1_700_000_000_000)


def produce_frame(version: int, batch: bytes) -> bytes:
    req = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="bench-topic",
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=i, records=batch) for i in range(4)
                ],
            )
        ],
    )
    return encode_request(RequestHeader(0, version, 1, "bench"), req)


def fetch_response(partitions: int) -> FetchResponse:
    part = FetchResponse.PartitionData
    return FetchResponse(
        throttle_time_ms=0,
        session_id=7,
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic="bench-topic",
                partitions=[
                    part(
                        partition_index=i,
                        high_watermark=1_000_000 + i,
                        last_stable_offset=1_000_000 + i,
                        log_start_offset=0,
                        records=b"r" * 128,
                    )
                    for i in range(partitions)
                ],
            )
        ],
    )


def bench_batch_crc(repeat: int) -> dict[str, float]:
    """Placeholder hook owned by the records engineer: parse header + verify CRC of 1 MiB."""
    try:
        import crc32c

        from kafkapy.protocol.records import parse_batch_header, validate_batch
    except ImportError:
        return {}
    batch = _batch(1 << 20)

    def check() -> None:
        validate_batch(batch, 0, parse_batch_header(batch, 0))

    raw = memoryview(batch)[21:]
    return {
        "batch_header_crc_1mib": _time_op(check, repeat),
        "crc32c_raw_1mib": _time_op(lambda: crc32c.crc32c(raw), repeat),
        "batch_bytes": float(len(batch)),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    batch = _batch(64 * 1024)
    results: dict[str, float] = {"produce_batch_bytes": float(len(batch))}
    for version in (9, 11):
        frame = produce_frame(version, batch)
        _header, msg = decode_request(frame)  # warm the codec cache (compile once)
        results[f"decode_produce_v{version}_4x64k"] = _time_op(lambda f=frame: decode_request(f), args.repeat)
    # Same request with 1 MiB batches: the figure must not grow (records are never copied).
    big = produce_frame(11, _batch(1 << 20))
    decode_request(big)
    results["decode_produce_v11_4x1m"] = _time_op(lambda: decode_request(big), args.repeat)
    body = encode_body(0, 11, True, msg)
    decode_body(0, 11, True, body, compiled=False)
    results["decode_produce_v11_4x64k_interpreted"] = _time_op(
        lambda: decode_body(0, 11, True, body, compiled=False), args.repeat
    )
    resp = fetch_response(100)
    for version in (12, 16):
        encode_response(1, version, 1, resp)
        results[f"encode_fetch_resp_v{version}_100p"] = _time_op(
            lambda v=version: encode_response(1, v, 1, resp), args.repeat
        )
    encode_body(1, 16, False, resp, compiled=False)
    results["encode_fetch_resp_v16_100p_interpreted"] = _time_op(
        lambda: encode_body(1, 16, False, resp, compiled=False), args.repeat
    )
    results.update(bench_batch_crc(args.repeat))

    for name, value in results.items():
        if name.endswith("bytes"):
            print(f"{name:44s} {int(value):>12d} bytes")
        else:
            print(f"{name:44s} {value * 1e6:>12.1f} us/op")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "python": platform.python_version(),
                "machine": platform.machine(),
                "unit": "seconds per operation (median)",
                "results": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
