"""Scale figures of one kafkapy node: many partitions, many connections, start-up, idle memory.

Usage:
    perf/scale_bench.py [--runs N] [--seconds S] [--json PATH] [--skip-startup]
                        [--linger-ms MS] [--c-producer PATH] [--vs-tree PATH]
                        [--only partitions|connections|batches]

Figures (each launches its own `python -m kafkapy serve` on a temporary data dir):

1. **1,000 partitions** (librdkafka, same producer settings as bench.py, acks=1): produce
   throughput to a 1-partition topic and to a 1,000-partition topic, alternating A/B per run;
   reported as the ratio 1000p / 1p (goal: >= 0.8), with client and broker CPU shares (the
   drop is librdkafka's per-partition batching: `--linger-ms 50` shows what a user with many
   partitions gets by letting batches fill).
2. **1,000 connections** (a raw trio client built on kafkapy's own codec, because 1,000 librdkafka
   producers would mean ~10,000 client threads on this 2-core machine): every connection sends
   pre-encoded Produce v7 requests (acks=1, one batch of 64 x 1 KiB records) for --seconds, with
   one request in flight per connection; the baseline is 1 connection with 8 in flight to one
   partition. Rows: 1 conn/1 partition, 1,000 conns/1 partition, 1,000 conns/1,000 partitions.
   The client pre-builds its requests and only patches the correlation id, so its own CPU stays
   small; its CPU share is printed next to each figure anyway.
2b. **broker CPU per batch** (`--only batches`, raw client): one connection, 4 in flight, each
   request one batch of 1,000 x 1 KiB to 1 partition, or 1,000 batches of 1 or 2 records to
   1,000 partitions (librdkafka's shape at linger.ms=5); broker CPU-us per batch and per message
   from /proc (the Python client decoding 1,000-partition responses is slower than the broker,
   so rates say little; CPU per batch is the figure). `--vs-tree PATH` alternates with another tree's kafkapy (A/B).
3. **start to ready**: `kafkapy serve` to its readiness line on an empty data dir, and on a data
   dir holding one topic of 10,000 partitions (created through the broker, then a clean stop).
4. **idle RSS** of the broker process (VmRSS from /proc) 2 s after ready, empty and with 10,000
   partitions.

The file-descriptor limit is raised to its hard limit first (the broker inherits it): 1,000
connections plus 1,000 partitions' segment and index files need several thousand fds.
Every loop is bounded by count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # perf/ is a directory of scripts, not a package

from kafkapy.protocol import ApiKey, FrameDecoder, RequestHeader, decode_response, encode_request
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse
from kafkapy.protocol.records import Record, build_batch

ROOT = Path(__file__).resolve().parent.parent
PRODUCE_VERSION = 7
RECORDS_PER_BATCH = 64


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def create_topic(bootstrap: str, partitions: int, timeout_s: float = 300.0) -> str:
    name = f"scale-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)], request_timeout=timeout_s
    )[name].result(timeout_s)
    return name


# --- 1. many partitions (librdkafka) ---------------------------------------------------------------


def partitions_figure(
    runs: int,
    messages: int,
    max_seconds: float,
    linger_ms: int = 5,
    c_producer: str | None = None,
    vs_tree: Path | None = None,
    vs_bootstrap: str | None = None,
) -> dict[str, Any]:
    """Per broker ("A" = this tree, "B" = `vs_tree` or an already running broker at
    `vs_bootstrap`, e.g. the native reference): rates and CPU shares per run; with two brokers
    every run measures A then B, so slow drift of the shared machine hits both alike. The same
    client against a native broker tells how much of the 1,000-partition drop is the client's."""
    trees: dict[str, Path | str] = {"A": ROOT}
    if vs_tree is not None:
        trees["B"] = vs_tree
    elif vs_bootstrap is not None:
        trees["B"] = vs_bootstrap
    keys = ("p1", "p1000", "client_cpu_p1", "client_cpu_p1000", "broker_cpu_p1", "broker_cpu_p1000")
    out: dict[str, dict[str, list[float]]] = {name: {k: [] for k in keys} for name in trees}
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp:
        brokers: dict[str, bench.LaunchedBroker] = {}
        bootstraps: dict[str, str] = {}
        pids: dict[str, int | None] = {}
        try:
            topics: dict[str, tuple[str, str]] = {}
            for name, tree in trees.items():
                if isinstance(tree, str):  # a running broker of someone else's
                    bootstraps[name], pids[name] = tree, bench.listener_pid(tree)
                else:
                    (Path(tmp) / name).mkdir()
                    brokers[name] = broker = bench.LaunchedBroker(Path(tmp) / name, root=tree)
                    bootstraps[name], pids[name] = broker.bootstrap, broker.proc.pid
                topics[name] = (create_topic(bootstraps[name], 1), create_topic(bootstraps[name], 1000))
            for i in range(runs):
                for name, bootstrap in bootstraps.items():
                    bench.BROKER_PID = pids[name]
                    one, many = topics[name]
                    for label, topic, n in (("p1", one, 1), ("p1000", many, 1000)):
                        print(f"partitions run {i + 1}/{runs}: broker {name}, {n} partition(s)",
                              file=sys.stderr, flush=True)  # fmt: skip
                        p = bench.Params(messages, 0, n, max_seconds, linger_ms=linger_ms, c_producer=c_producer)
                        res = bench.produce_throughput(bootstrap, topic, "1", p)
                        out[name][label].append(res["msgs_per_s"])
                        out[name][f"client_cpu_{label}"].append(res["client_cpu_pct"])
                        out[name][f"broker_cpu_{label}"].append(res["broker_cpu_pct"])
        finally:
            for broker in brokers.values():
                broker.stop()
    return {
        "linger_ms": linger_ms,
        "c_producer": c_producer,
        "trees": {name: str(tree) for name, tree in trees.items()},
        **out["A"],
        "ratio_median": statistics.median(out["A"]["p1000"]) / statistics.median(out["A"]["p1"]),
        "per_tree": out,
    }


# --- 2. many connections (raw client) --------------------------------------------------------------


def _produce_frame(
    topic: str, partition: int, records_per_batch: int = RECORDS_PER_BATCH, partitions: int = 1
) -> bytearray:
    """A pre-encoded Produce v7 request: one batch of `records_per_batch` 1 KiB records to each
    of `partitions` partitions starting at `partition`."""
    now = int(time.time() * 1000)
    value = os.urandom(bench.VALUE_BYTES // 2).hex().encode()
    records = [Record(i, 0, str(i).encode(), value, []) for i in range(records_per_batch)]
    batch = build_batch(records, base_timestamp=now)
    req = ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition + i, records=batch)
                    for i in range(partitions)
                ],
            )
        ],
    )
    body = encode_request(RequestHeader(ApiKey.PRODUCE, PRODUCE_VERSION, 0, "scale-bench"), req)
    return bytearray(struct.pack(">i", len(body)) + body)


async def _connection(
    host: str,
    port: int,
    frame: bytearray,
    inflight: int,
    stop_at: float,
    counts: list[int],
    errors: list[int],
    per_response: int = RECORDS_PER_BATCH,
) -> None:
    stream = await trio.open_tcp_stream(host, port)
    decoder = FrameDecoder()
    correlation = 0
    outstanding = 0
    async with stream:
        while True:
            while outstanding < inflight and trio.current_time() < stop_at:
                struct.pack_into(">i", frame, 8, correlation)  # after size, api key, version
                correlation += 1
                await stream.send_all(frame)
                outstanding += 1
            if outstanding == 0:
                return
            data = await stream.receive_some(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            for resp in decoder.feed(data):
                outstanding -= 1
                _cid, msg = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, resp)
                assert isinstance(msg, ProduceResponse)
                if any(p.error_code for t in msg.responses for p in t.partition_responses):
                    errors[0] += 1
                else:
                    counts[0] += per_response


async def _drive(bootstrap: str, topic: str, partitions: int, conns: int, inflight: int, seconds: float) -> dict[str, float]:
    host, port = bootstrap.rsplit(":", 1)
    frames = {p: _produce_frame(topic, p) for p in range(min(partitions, conns))}
    counts, errors = [0], [0]
    meter = bench.Meter()
    stop_at = trio.current_time() + seconds
    with trio.fail_after(seconds + 60):
        async with trio.open_nursery() as nursery:
            for c in range(conns):
                frame = bytearray(frames[c % partitions])
                nursery.start_soon(_connection, host, int(port), frame, inflight, stop_at, counts, errors)
                if c % 50 == 49:
                    await trio.lowlevel.checkpoint()  # let connects proceed instead of 1,000 at once
    wall, cpu = meter.stop()
    return {
        "msgs_per_s": counts[0] / wall,
        "errors": errors[0],
        "client_cpu_pct": cpu,
        "broker_cpu_pct": meter.broker_pct,
    }


def connections_figure(runs: int, seconds: float) -> dict[str, Any]:
    cases = [("1conn_1p", 1, 1, 8), ("1000conn_1p", 1, 1000, 1), ("1000conn_1000p", 1000, 1000, 1)]
    out: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in cases}
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp:
        broker = bench.LaunchedBroker(Path(tmp))
        bench.BROKER_PID = broker.proc.pid
        try:
            topics = {1: create_topic(broker.bootstrap, 1), 1000: create_topic(broker.bootstrap, 1000)}
            for i in range(runs):
                for name, parts, conns, inflight in cases:
                    print(f"connections run {i + 1}/{runs}: {name}", file=sys.stderr, flush=True)
                    res = trio.run(_drive, broker.bootstrap, topics[parts], parts, conns, inflight, seconds)
                    out[name].append(res)
        finally:
            broker.stop()
    med = {name: statistics.median(r["msgs_per_s"] for r in rs) for name, rs in out.items()}
    return {
        "runs": out,
        "median_msgs_per_s": med,
        "ratio_1000conn_1p": med["1000conn_1p"] / med["1conn_1p"],
        "ratio_1000conn_1000p": med["1000conn_1000p"] / med["1conn_1p"],
    }


# --- 2b. broker CPU per batch (raw client, 1,000 partitions per request) --------------------------

BATCH_CASES = (
    # name, partitions per request, records per batch (1 KiB each); one batch per partition
    ("1p_x1000", 1, 1000),
    ("1000p_x1", 1000, 1),
    ("1000p_x2", 1000, 2),
)


async def _drive_batches(
    bootstrap: str, topic: str, partitions: int, per_batch: int, seconds: float
) -> dict[str, float]:
    host, port = bootstrap.rsplit(":", 1)
    frame = _produce_frame(topic, 0, per_batch, partitions)
    counts, errors = [0], [0]
    meter = bench.Meter()
    stop_at = trio.current_time() + seconds
    with trio.fail_after(seconds + 60):
        await _connection(
            host, int(port), frame, 4, stop_at, counts, errors, per_response=partitions * per_batch
        )
    wall, cpu = meter.stop()
    broker_s = meter.broker_pct * wall / 100
    msgs = counts[0]
    return {
        "msgs_per_s": msgs / wall,
        "errors": errors[0],
        "client_cpu_pct": cpu,
        "broker_cpu_pct": meter.broker_pct,
        "broker_us_per_msg": 1e6 * broker_s / msgs if msgs else float("nan"),
        "broker_us_per_batch": 1e6 * broker_s / (msgs / per_batch) if msgs else float("nan"),
    }


def batches_figure(runs: int, seconds: float, vs_tree: Path | None = None) -> dict[str, Any]:
    """Broker CPU per produced batch: one connection, 4 requests in flight, each request one
    batch of 1,000 x 1 KiB to one partition, or 1,000 batches of 1 or 2 records to 1,000
    partitions (what librdkafka sends with 1,000 partitions and linger.ms=5). Broker CPU
    from /proc, so the figure barely depends on what else the machine runs. With `vs_tree`, the
    same against that tree's kafkapy, runs alternating."""
    trees = {"A": ROOT} | ({"B": vs_tree} if vs_tree is not None else {})
    out: dict[str, dict[str, list[dict[str, float]]]] = {
        name: {case: [] for case, *_ in BATCH_CASES} for name in trees
    }
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp:
        brokers: dict[str, bench.LaunchedBroker] = {}
        try:
            topics = {}
            for name, tree in trees.items():
                (Path(tmp) / name).mkdir()
                brokers[name] = broker = bench.LaunchedBroker(Path(tmp) / name, root=tree)
                topics[name] = {n: create_topic(broker.bootstrap, n) for n in (1, 1000)}
            for i in range(runs):
                for name, broker in brokers.items():
                    bench.BROKER_PID = broker.proc.pid
                    for case, parts, per_batch in BATCH_CASES:
                        print(f"batches run {i + 1}/{runs}: broker {name}, {case}", file=sys.stderr, flush=True)
                        res = trio.run(_drive_batches, broker.bootstrap, topics[name][parts], parts, per_batch, seconds)
                        out[name][case].append(res)
        finally:
            for broker in brokers.values():
                broker.stop()
    return {"trees": {name: str(tree) for name, tree in trees.items()}, "per_tree": out}


# --- 3./4. start-up and idle memory ----------------------------------------------------------------


def _launch_ready(data_dir: Path) -> tuple[float, float, bench.LaunchedBroker]:
    broker = bench.LaunchedBroker(data_dir, timeout_s=120)
    time.sleep(2)
    return broker.startup_s, rss_mib(broker.proc.pid), broker


def startup_figure(runs: int, partitions: int) -> dict[str, Any]:
    empty_s, empty_rss = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp:
            s, rss, broker = _launch_ready(Path(tmp))
            broker.stop()
            empty_s.append(s)
            empty_rss.append(rss)
    full_s, full_rss = [], []
    with tempfile.TemporaryDirectory(prefix="kafkapy-scale-") as tmp:
        broker = bench.LaunchedBroker(Path(tmp))
        print(f"creating a topic of {partitions} partitions ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        create_topic(broker.bootstrap, partitions)
        create_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        broker.stop()
        stop_s = time.perf_counter() - t0
        for _ in range(runs):
            s, rss, broker = _launch_ready(Path(tmp))
            broker.stop()
            full_s.append(s)
            full_rss.append(rss)
    return {
        "empty_startup_s": empty_s,
        "empty_idle_rss_mib": empty_rss,
        "partitions": partitions,
        "create_topic_s": create_s,
        "clean_stop_s": stop_s,
        "full_startup_s": full_s,
        "full_idle_rss_mib": full_rss,
    }


def _spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=100_000, help="per librdkafka produce run")
    parser.add_argument("--seconds", type=float, default=8.0, help="per raw-client run")
    parser.add_argument("--startup-partitions", type=int, default=10_000)
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument("--linger-ms", type=int, default=5,
                        help="producer linger.ms of the partitions figure (bench.py uses 5)")
    parser.add_argument("--c-producer", metavar="PATH",
                        help="partitions figure with perf/cdriver/produce.c (make -C perf/cdriver wheel)")
    parser.add_argument("--vs-tree", metavar="PATH", type=Path,
                        help="partitions figure also against the kafkapy in PATH (e.g. a git archive of"
                             " an older commit), runs alternating")
    parser.add_argument("--vs", metavar="BOOTSTRAP",
                        help="partitions figure: also measure this running broker (e.g. Tansu), alternating")
    parser.add_argument("--only", choices=["partitions", "connections", "batches"],
                        help="run just this figure (and no start-up figure)")
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "scale_bench.json")
    args = parser.parse_args(argv)
    fds = raise_fd_limit()
    report: dict[str, Any] = {"fd_limit": fds, "runs": args.runs}

    parts: dict[str, Any] = {}
    conns: dict[str, Any] = {}
    if args.only in (None, "partitions"):
        report["partitions"] = parts = partitions_figure(args.runs, args.messages, 60.0, args.linger_ms,
                                                          args.c_producer, args.vs_tree, args.vs)
    if args.only in (None, "connections"):
        report["connections"] = conns = connections_figure(args.runs, args.seconds)
    batches: dict[str, Any] = {}
    if args.only in (None, "batches"):
        report["batches"] = batches = batches_figure(args.runs, args.seconds, args.vs_tree)
    if args.only is not None:
        args.skip_startup = True
    if not args.skip_startup:
        report["startup"] = start = startup_figure(args.runs, args.startup_partitions)

    print(f"\nfd limit {fds}; medians of {args.runs} alternating runs (min-max)")
    if parts:
        client = "C producer" if parts["c_producer"] else "librdkafka"
        for tree, res in parts["per_tree"].items():
            if len(parts["per_tree"]) > 1:
                print(f"broker {tree}: {parts['trees'][tree]}")
            for label, name in (("p1", "1 partition:     "), ("p1000", "1,000 partitions:")):
                cli = statistics.median(res[f"client_cpu_{label}"])
                brk = statistics.median(res[f"broker_cpu_{label}"])
                # CPU-us per message of each process: far less sensitive to other load than msg/s
                brk_us = [b / r * 1e4 for b, r in zip(res[f"broker_cpu_{label}"], res[label], strict=True)]
                cli_us = [c / r * 1e4 for c, r in zip(res[f"client_cpu_{label}"], res[label], strict=True)]
                print(f"{client} acks=1 linger.ms={parts['linger_ms']}, {name} {_spread(res[label])} msg/s"
                      f"  client cpu {cli:.0f}%  broker cpu {brk:.0f}%"
                      f"  us/msg: client {statistics.median(cli_us):.2f}, broker {_spread(brk_us)}")  # fmt: skip
            ratio = statistics.median(res["p1000"]) / statistics.median(res["p1"])
            print(f"  ratio 1000p/1p: {ratio:.2f} (goal >= 0.80)")
    for name, rs in conns.get("runs", {}).items():
        rates = [r["msgs_per_s"] for r in rs]
        cpu = statistics.median(r["client_cpu_pct"] for r in rs)
        brk = statistics.median(r["broker_cpu_pct"] for r in rs)
        errs = sum(int(r["errors"]) for r in rs)
        print(f"raw client {name:16} {_spread(rates)} msg/s  client cpu {cpu:.0f}%  broker cpu {brk:.0f}%  errors {errs}")
    for tree, cases in batches.get("per_tree", {}).items():
        if len(batches["per_tree"]) > 1:
            print(f"broker {tree}: {batches['trees'][tree]}")
        for case, rs in cases.items():
            rates = [r["msgs_per_s"] for r in rs]
            per_batch = [r["broker_us_per_batch"] for r in rs]
            per_msg = [r["broker_us_per_msg"] for r in rs]
            print(f"raw client {case:10} {_spread(rates)} msg/s  broker us/batch {_spread(per_batch)}"
                  f"  us/msg {statistics.median(per_msg):.2f}"
                  f"  broker cpu {statistics.median(r['broker_cpu_pct'] for r in rs):.0f}%"
                  f"  errors {sum(int(r['errors']) for r in rs)}")  # fmt: skip
    if conns:
        print(f"  ratio 1000 conns/1 conn: {conns['ratio_1000conn_1p']:.2f} (1 partition), "
              f"{conns['ratio_1000conn_1000p']:.2f} (1,000 partitions) (goal >= 0.80)")  # fmt: skip
    if not args.skip_startup:
        print(f"start to ready, empty data dir: {_spread(start['empty_startup_s'])} s (goal < 1 s)")
        print(f"start to ready, {start['partitions']} partitions: {_spread(start['full_startup_s'])} s (goal < 5 s)"
              f"  [topic creation {start['create_topic_s']:.1f} s, clean stop {start['clean_stop_s']:.1f} s]")  # fmt: skip
        print(f"idle RSS, empty: {_spread(start['empty_idle_rss_mib'])} MiB (goal < 80 MB)")
        print(f"idle RSS, {start['partitions']} partitions: {_spread(start['full_idle_rss_mib'])} MiB")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
