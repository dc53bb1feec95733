"""Fixed cost of one small produce request, in-process: decode -> handler -> encode.

Why: librdkafka with 1,000 partitions sends ~one ~80-record partition batch per Produce request
(perf/README.md, "1,000 partitions, second round"), so the broker's *per-request* cost decides
that figure. This loop runs exactly the broker's request path minus the socket and trio's task
scheduling - `decode_request(frame)`, `handle_produce(ctx, req)`, `encode_response(...)` - on a
real on-disk broker (pwrite included), and prints CPU-us per request plus a per-phase split.

Load-insensitive figure: run it under callgrind twice, with `--requests N` and `--requests 0`,
and divide the instruction difference by N (the `--callgrind` flag does both and prints it):

    perf/request_cost.py                                  # CPU-us per request, phases
    perf/request_cost.py --callgrind                      # instructions per request (slow)
    perf/request_cost.py --profile | head -40             # cProfile of the loop
    perf/request_cost.py --socket                         # + the connection (socket pair)
    perf/request_cost.py --socket --callgrind             # instructions, per shape and floor
    PYTHONPATH=/tmp/old perf/request_cost.py --callgrind  # an older tree, for A/B

Options: `--partitions P` (batches per request, default 1), `--records R` per batch (default
80), `--value-bytes` (default 1024), `--version` of Produce (default 9), `--json PATH`.

`--fetch` measures a consumer's Fetch (v12, read_uncommitted, no session) instead: each
partition holds one such batch, and every request reads it back from offset 0 - decode,
`handle_fetch` (which encodes its answer around file regions) and closing the regions' fds, as
the connection does after sending.

`--socket` sends each of `--shapes` (produce, fetch, heartbeat, metadata; see request_shapes.py)
through a `Connection` on a socket pair, and measures the trio floor - a minimal trio server
answering 64-byte frames on the same kind of socket pair - in the same run, printing each shape's
broker CPU per request also as a multiple of that floor (`<shape>_x_floor`). The small-request
figures are taken with `--records 1 --value-bytes 100`.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.config import BrokerConfig
from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.protocol import ApiKey, RequestHeader, decode_request, encode_request, encode_response
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest, FetchRequest, ProduceRequest
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from kafkapy.server.connection import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent))
from request_shapes import SHAPES, floor_cpu_us, prepare, run_client

TOPIC = "cost"
FETCH_VERSION = 12


def build_frame(version: int, partitions: int, records: int, value_bytes: int) -> bytes:
    """One Produce request as the broker receives it (size prefix stripped)."""
    value = b"x" * value_bytes
    batch = build_batch(
        [Record(i, 0, b"k%d" % i, value, []) for i in range(records)],
        base_timestamp=int(time.time() * 1000),
    )
    req = ProduceRequest(
        acks=1,
        timeout_ms=30_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=batch)
                    for p in range(partitions)
                ],
            )
        ],
    )
    return encode_request(RequestHeader(ApiKey.PRODUCE, version, 1, "request-cost"), req)


def build_fetch_frame(partitions: int) -> bytes:
    """One consumer Fetch of every partition from offset 0 (no session, no wait)."""
    req = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
            for p in range(partitions)
        ])],
    )
    return encode_request(RequestHeader(ApiKey.FETCH, FETCH_VERSION, 1, "request-cost"), req)


async def _with_node(
    loop: Callable[[argparse.Namespace, Broker], Awaitable[dict[str, Any]]],
    args: argparse.Namespace, data_dir: str,
) -> dict[str, Any]:
    """Run `loop` against a node built and started as `kafkapy serve` does (a quorum of one),
    with topic TOPIC created through its controller and led here; the node's own tasks (Raft,
    heartbeats) run meanwhile, as they do in production."""
    broker = Broker(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data_dir,
        "log.retention.check.interval.ms": "600000", "offsets.topic.num.partitions": "1",
    }))
    server = Server(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        try:
            if not await server.wait_ready():
                raise RuntimeError("the node stopped before it was ready")
            topic = CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=args.partitions, replication_factor=1)
            created = await broker.cluster.channel.create_topics(
                CreateTopicsRequest(topics=[topic], timeout_ms=30_000))
            if created.topics[0].error_code:
                raise RuntimeError(f"creating {TOPIC} failed: {created.topics[0].error_code}")
            while any(isinstance(broker.partitions.leader(TOPIC, p), ErrorCode)
                      for p in range(args.partitions)):
                await broker.replicas.next_apply()  # the topic reaches this node's image
            return await loop(args, broker)
        finally:
            server.request_shutdown()
            await server.stopped.wait()


async def _fetch_loop(args: argparse.Namespace, broker: Broker) -> dict[str, Any]:
    state = ConnectionState("PLAINTEXT", "request-cost")
    produce_header, produce = decode_request(
        bytearray(build_frame(args.version, args.partitions, args.records, args.value_bytes))
    )
    await handle_produce(RequestContext(broker.ports, produce_header, state, 0), produce)
    frame = build_fetch_frame(args.partitions)
    phases = {"decode": 0.0, "handle": 0.0, "encode": 0.0}

    async def one(seq: int, timed: bool) -> None:
        t0 = time.process_time()
        header, req = decode_request(bytearray(frame))
        t1 = time.process_time()
        resp = await handle_fetch(RequestContext(broker.ports, header, state, seq), req)
        t2 = time.process_time()
        assert resp.size > 100, "the fetch returned no record data"
        for fd in resp.fds():  # the connection closes them once the answer is sent
            os.close(fd)
        t3 = time.process_time()
        if timed:
            phases["decode"] += t1 - t0
            phases["handle"] += t2 - t1
            phases["encode"] += t3 - t2

    for i in range(3):
        await one(i + 1, False)
    gc.disable()
    start = time.process_time()
    for i in range(args.requests):
        await one(i + 4, True)
    cpu = time.process_time() - start
    gc.enable()
    n = max(args.requests, 1)
    return {
        "cpu_us_per_request": cpu / n * 1e6,
        **{f"{k}_us": v / n * 1e6 for k, v in phases.items()},
    }


async def _loop(args: argparse.Namespace, broker: Broker) -> dict[str, Any]:
    frame = build_frame(args.version, args.partitions, args.records, args.value_bytes)
    state = ConnectionState("PLAINTEXT", "request-cost")
    phases = {"decode": 0.0, "handle": 0.0, "encode": 0.0}

    async def one(seq: int, timed: bool) -> None:
        buf = bytearray(frame)  # the connection hands in a bytearray of its own (>= 64 KiB)
        t0 = time.process_time()
        header, req = decode_request(buf)
        t1 = time.process_time()
        ctx = RequestContext(broker.ports, header, state, seq)
        resp = await handle_produce(ctx, req)
        t2 = time.process_time()
        assert resp is not None
        encode_response(header.api_key, header.api_version, header.correlation_id, resp)
        t3 = time.process_time()
        if timed:
            phases["decode"] += t1 - t0
            phases["handle"] += t2 - t1
            phases["encode"] += t3 - t2

    for i in range(3):  # warm: codec compile, log files open
        await one(i, False)
    gc.disable()
    profiler = cProfile.Profile() if args.profile else None
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    for i in range(args.requests):
        await one(i + 3, True)
    if profiler is not None:
        profiler.disable()
    cpu = time.process_time() - start
    gc.enable()
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
    n = max(args.requests, 1)
    return {
        "cpu_us_per_request": cpu / n * 1e6,
        **{f"{k}_us": v / n * 1e6 for k, v in phases.items()},
    }


async def _socket_loop(args: argparse.Namespace, broker: Broker) -> dict[str, Any]:
    """The whole per-request path of a connection (receive, decode, handler task, encode, send)
    over a loopback socket pair, for each of `--shapes` in turn, and the trio floor: the broker's
    own thread CPU per request (the client runs in a thread of its own, so its CPU is not
    counted). The fetch shape goes first, while its partition holds only the batch it reads."""
    produce = build_frame(args.version, args.partitions, args.records, args.value_bytes)
    result: dict[str, Any] = {}
    floor = 0.0
    if "floor" in args.shapes:
        await floor_cpu_us(3, args.inflight)  # warm
        floor = await floor_cpu_us(args.requests, args.inflight)
        result["floor_cpu_us"] = floor
    for shape in sorted((s for s in args.shapes if s != "floor"), key=SHAPES.index):
        frame = await prepare(shape, args, broker, produce, TOPIC)
        ours, theirs = socket.socketpair()
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
        conn = Connection(broker, stream, "PLAINTEXT", "request-cost")
        client = threading.Thread(
            target=run_client, args=(theirs, frame, args.requests + 3, args.inflight), daemon=True
        )
        profiler = cProfile.Profile() if args.profile else None
        gc.disable()
        start = time.thread_time()
        client.start()
        if profiler is not None:
            profiler.enable()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.run)
            await trio.to_thread.run_sync(client.join)
        cpu = time.thread_time() - start
        gc.enable()
        if profiler is not None:
            profiler.disable()
            print(f"-- {shape}")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(45)
        result[f"{shape}_cpu_us"] = cpu = cpu / max(args.requests, 1) * 1e6
        if floor:
            result[f"{shape}_x_floor"] = cpu / floor
    return result


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.socket:
        with tempfile.TemporaryDirectory(prefix="request-cost-") as d:
            return trio.run(_with_node, _socket_loop, args, d)
    with tempfile.TemporaryDirectory(prefix="request-cost-") as d:
        return trio.run(_with_node, _fetch_loop if args.fetch else _loop, args, d)


def _instructions(args: argparse.Namespace, requests: int, shapes: list[str]) -> int:
    """Instructions of one inner run under callgrind (Python's hash seed fixed)."""
    with tempfile.TemporaryDirectory(prefix="request-cost-cg-") as d:
        out = Path(d) / "callgrind.out"
        cmd = [
            "valgrind", "--tool=callgrind", "--dump-instr=no", f"--callgrind-out-file={out}",
            sys.executable, __file__, "--requests", str(requests),
            "--partitions", str(args.partitions), "--records", str(args.records),
            "--value-bytes", str(args.value_bytes), "--version", str(args.version),
            "--inflight", str(args.inflight), "--inner",
            *(["--socket", "--shapes", ",".join(shapes)] if args.socket else []),
            *(["--fetch"] if args.fetch else []),
        ]
        env = dict(os.environ, PYTHONHASHSEED="0")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        m = re.search(r"Collected : (\d+)", proc.stderr)
        assert m is not None, proc.stderr[-2000:]
        return int(m.group(1))


def _callgrind(args: argparse.Namespace) -> dict[str, Any]:
    """Instructions per request: (N requests - 0 requests) / N, each under callgrind; with
    `--socket`, per shape (each in a run of its own) and for the floor."""
    n = max(args.requests, 1)
    if not args.socket:
        counts = [_instructions(args, args.requests, []), _instructions(args, 0, [])]
        return {"instructions_per_request": (counts[0] - counts[1]) / n, "instructions_total": counts}
    result: dict[str, Any] = {}
    for shape in args.shapes:
        per = (_instructions(args, args.requests, [shape]) - _instructions(args, 0, [shape])) / n
        result[f"{shape}_instructions"] = per
    floor = result.get("floor_instructions")
    for shape in args.shapes:
        if floor and shape != "floor":
            result[f"{shape}_instructions_x_floor"] = result[f"{shape}_instructions"] / floor
    return result


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--records", type=int, default=80)
    p.add_argument("--value-bytes", type=int, default=1024)
    p.add_argument("--version", type=int, default=9)
    p.add_argument("--runs", type=int, default=5, help="CPU mode: median of this many loops")
    p.add_argument("--callgrind", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--socket", action="store_true", help="through a Connection on a socket pair")
    p.add_argument("--inflight", type=int, default=5, help="--socket: requests in flight")
    p.add_argument("--fetch", action="store_true", help="a consumer Fetch instead of a Produce")
    p.add_argument(
        "--shapes", type=lambda v: v.split(","), default=[*SHAPES, "floor"],
        help="--socket: comma-separated, of produce,fetch,heartbeat,metadata,floor (default all)",
    )
    p.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.inner or args.profile:
        print(_run(args))
        return
    if args.callgrind:
        if args.requests == 2000:
            args.requests = 200
        result = _callgrind(args)
    else:
        runs = [_run(args) for _ in range(args.runs)]
        result = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        if len(runs) > 1:
            result["spread"] = {k: [round(min(r[k] for r in runs), 1), round(max(r[k] for r in runs), 1)]
                                for k in runs[0]}
        result["runs"] = runs
    result["shape"] = {
        "partitions": args.partitions,
        "records": args.records,
        "value_bytes": args.value_bytes,
        "version": args.version,
        "requests": args.requests,
    }
    summary = {
        k: (round(v, 1) if isinstance(v, float) else v) for k, v in result.items() if k != "runs"
    }
    print(json.dumps(summary))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
