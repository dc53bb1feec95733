"""Receive path micro-benchmark: socket -> frames -> decoded Produce request -> batches ready to
write, old way (`receive_some` + `FrameDecoder` + a copy for the offset patch) against the
connection's `recv_into` path (`frames.SocketFrames`, records patched in place).

Why in isolation: the whole-broker figures swing by +-20% on the shared machine, more than this
path's share, so its cost is measured here as receiver CPU time per MiB (thread CPU clock, the
sender runs in its own thread), alternating the two ways per run.

Usage:
    perf/receive_bench.py [--mib-per-frame 1] [--frames 200] [--runs 7] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

import trio

from kafkapy.protocol import ApiKey, FrameDecoder, RequestHeader, decode_request, encode_request
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.protocol.records import Record, build_batch, set_base_offset
from kafkapy.server.frames import SocketFrames

ROOT = Path(__file__).resolve().parent.parent


def _frame(mib: float) -> bytes:
    value = b"x" * 1024
    n = int(mib * 1024)
    records = [Record(i, 0, None, value, []) for i in range(n)]
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=build_batch(records, base_timestamp=0))
                ],
            )
        ],
    )
    body = encode_request(RequestHeader(ApiKey.PRODUCE, 7, 1, "bench"), req)
    return struct.pack(">i", len(body)) + body


def _sender(sock: socket.socket, data: bytes, frames: int) -> None:
    with sock:
        for _ in range(frames):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _consume(frame: bytes | bytearray) -> int:
    _header, req = decode_request(frame)
    assert isinstance(req, ProduceRequest)
    records = req.topic_data[0].partition_data[0].records
    assert records is not None
    data = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    set_base_offset(data, 0, 42)  # what the log does before writing
    return len(data)


async def _run(way: str, data: bytes, frames: int) -> float:
    a, b = socket.socketpair()
    thread = threading.Thread(target=_sender, args=(a, data, frames), daemon=True)
    rx = trio.socket.from_stdlib_socket(b)
    total = 0
    cpu0 = time.thread_time()
    thread.start()
    with rx, trio.fail_after(120):
        if way == "old":
            decoder = FrameDecoder(200 * 2**20)
            while True:
                chunk = await rx.recv(256 * 1024)
                if not chunk:
                    break
                for piece in decoder.feed(chunk):
                    total += _consume(piece)
        else:
            reader = SocketFrames(rx, 200 * 2**20)
            while got := await reader.receive():
                for frame in got:
                    total += _consume(frame)
    cpu = time.thread_time() - cpu0
    thread.join(10)
    return cpu / (total / 2**20) * 1000  # receiver CPU ms per MiB of records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib-per-frame", type=float, default=1.0)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "receive_bench.json")
    args = parser.parse_args(argv)
    data = _frame(args.mib_per_frame)
    results: dict[str, list[float]] = {"old": [], "recv_into": []}
    for _ in range(args.runs):
        for way in results:
            results[way].append(trio.run(_run, way, data, args.frames))
    report: dict[str, Any] = {"params": vars(args) | {"json": str(args.json)}, "ms_per_mib": results}
    for way, vals in results.items():
        print(f"{way:10} receiver CPU {statistics.median(vals):.3f} ms/MiB (min {min(vals):.3f}, max {max(vals):.3f})")
    ratio = statistics.median(results["recv_into"]) / statistics.median(results["old"])
    print(f"recv_into / old: {ratio:.2f}")
    report["ratio"] = ratio
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
