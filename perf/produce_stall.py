"""Another client's request latency while a compression bomb is produced: a real `kafkapy serve`,
one connection producing one zstd batch of many 100-byte records (inflating to just under the
64 MiB decompression cap by default), a second connection sending ApiVersions back to back.

Why: every record of a client batch is walked before the append (Kafka's LogValidator), seconds
for such a batch in Python; walked on the event loop, it froze every other client for that long.
`--vs ROOT` runs the same steps on another source tree (e.g. `git archive` of an older commit
unpacked in /tmp) right after, for an A/B in one run.

    perf/produce_stall.py                                  # this tree
    perf/produce_stall.py --vs /tmp/old-tree               # and another, for A/B
    perf/produce_stall.py --records 300000 --json out.json

Prints the other client's p50/p99/max latency during the produce (and idle, before it) and writes
JSON (`--json`, default perf/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkapy.protocol import ApiKey, RequestHeader, decode_response, encode_request  # noqa: E402
from kafkapy.protocol.compression import Compression, compress  # noqa: E402
from kafkapy.protocol.crc import crc32c  # noqa: E402
from kafkapy.protocol.messages import (  # noqa: E402
    ApiVersionsRequest,
    CreateTopicsRequest,
    ProduceRequest,
)
from kafkapy.protocol.records import Record, build_batch  # noqa: E402

READY_RE = re.compile(r"kafkapy ready: listening on (?P<host>[^\s:]+):(?P<port>\d+)")
TOPIC = "bomb"


def launch(root: Path, data_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m kafkapy serve` from `root`; its process and port once it printed ready."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--data-dir", data_dir],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            break
        match = READY_RE.search(line)
        if match:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain the log
            return proc, int(match["port"])
    proc.kill()
    raise SystemExit(f"kafkapy from {root} did not print its ready line")


class Conn:
    """A blocking client connection: one request, one response."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    def request(self, api_key: int, version: int, msg: Any) -> Any:
        self.corr += 1
        frame = encode_request(RequestHeader(api_key, version, self.corr, "produce-stall"), msg)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        corr, response = decode_response(api_key, version, self._read(size))
        assert corr == self.corr
        return response

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            out += chunk
        return bytes(out)


def _varint(zigzagged: int) -> bytes:
    out = bytearray()
    while zigzagged >= 0x80:
        out.append(zigzagged & 0x7F | 0x80)
        zigzagged >>= 7
    out.append(zigzagged)
    return bytes(out)


def bomb(records: int) -> bytes:
    """One zstd batch of `records` records with 100-byte values (offset deltas 0, 1, 2...)."""
    region = bytearray()
    for i in range(records):
        body = b"\x00\x00" + _varint(i << 1) + b"\x01" + _varint(200) + bytes(100) + b"\x00"
        region += _varint(len(body) << 1) + body
    out = bytearray(build_batch([Record(0, 0, None, b"")], base_timestamp=int(time.time() * 1000))[:61])
    out += compress(Compression.ZSTD, bytes(region))
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, int(Compression.ZSTD))
    struct.pack_into(">i", out, 23, records - 1)
    struct.pack_into(">i", out, 57, records)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def create_topic(conn: Conn) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=-1)
    response = conn.request(ApiKey.CREATE_TOPICS, 7, CreateTopicsRequest(topics=[topic], timeout_ms=30_000))
    assert response.topics[0].error_code == 0, response
    time.sleep(1.0)  # published on this single node by then


def pings(conn: Conn, stop: threading.Event, into: list[tuple[float, float]]) -> None:
    """ApiVersions back to back until `stop`: (sent at, latency) per request."""
    while not stop.is_set():
        sent = time.perf_counter()
        conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
        into.append((sent, time.perf_counter() - sent))


def summary(latencies: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in latencies)
    if not ms:
        return {"count": 0}
    return {"count": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2), "max_ms": round(ms[-1], 2)}


def measure(root: Path, batch: bytes, records: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data_dir:
        proc, port = launch(root, data_dir)
        try:
            producer, other = Conn(port), Conn(port)
            create_topic(producer)
            sent: list[tuple[float, float]] = []
            stop = threading.Event()
            pinger = threading.Thread(target=pings, args=(other, stop, sent))
            pinger.start()
            time.sleep(1.0)
            started = time.perf_counter()
            request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
                name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
            answer = producer.request(ApiKey.PRODUCE, 9, request).responses[0].partition_responses[0]
            ended = time.perf_counter()
            time.sleep(0.2)
            stop.set()
            pinger.join()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    during = [lat for at, lat in sent if started <= at < ended or (at < started and at + lat > started)]
    return {
        "root": str(root), "records": records, "batch_bytes": len(batch),
        "produce_s": round(ended - started, 3), "produce_error_code": answer.error_code,
        "base_offset": answer.base_offset,
        "idle": summary([lat for at, lat in sent if at + lat < started]), "during_produce": summary(during),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=600_000, help="100-byte records in the bomb")
    parser.add_argument("--vs", type=Path, help="another source tree, measured after this one")
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "produce_stall.json")
    args = parser.parse_args()
    batch = bomb(args.records)
    results = [measure(root, batch, args.records) for root in [ROOT, *([args.vs] if args.vs else [])]]
    print(f"bomb: {args.records} records x 100 B, zstd, {len(batch)} bytes on the wire")
    print(f"{'tree':<36} {'produce s':>9} {'err':>4} | other client during: {'n':>5} {'p50 ms':>8}"
          f" {'p99 ms':>8} {'max ms':>8} | idle p50 ms")
    for r in results:
        d, idle = r["during_produce"], r["idle"]
        print(f"{r['root']:<36} {r['produce_s']:>9.2f} {r['produce_error_code']:>4} |"
              f" {d.get('count', 0):>25} {d.get('p50_ms', 0):>8.2f} {d.get('p99_ms', 0):>8.2f}"
              f" {d.get('max_ms', 0):>8.2f} | {idle.get('p50_ms', 0):.2f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
