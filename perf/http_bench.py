"""What serving /metrics, /api/status and the status page costs the Kafka path, by partition count.

Usage:
    perf/http_bench.py [--partitions 1,100,1000] [--requests 20] [--json out.json]

An in-process broker (real Server, HTTP listener on a free port) with one topic of N partitions
is scraped by a real HTTP client in a thread, one GET after another, while a probe task on the
broker's trio loop sleeps 1 ms at a time and records how late it wakes up: that lateness is the
stall a Kafka request arriving meanwhile would see. Reported per partition count and path:
GET latency (median, max) and probe lateness (p99, max) during the GETs, next to the probe's
lateness with no GETs at all (same run, before them). It also prints the CPU cost of the
request path's metrics hooks (always on, listener or not). Figures only, no thresholds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.config import BrokerConfig
from kafkapy.protocol.messages import CreateTopicsRequest
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("/metrics", "/api/status", "/api/status?summary=1", "/", "/?fragment=tables")


def _pct(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))] if ordered else 0.0


async def _probe(lateness: list[float], stop: trio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        await trio.sleep(0.001)
        lateness.append((time.perf_counter() - started - 0.001) * 1000)


def _get_many(port: int, path: str, count: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times = []
    for _ in range(count):
        started = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        assert response.status == 200, response.status
        times.append((time.perf_counter() - started) * 1000)
    conn.close()
    return times


async def measure(partitions: int, requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kafkapy-http-bench-") as tmp:
        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": tmp,
            "offsets.topic.num.partitions": "1",
            "kafkapy.http.listener": "127.0.0.1:0",
            "log.retention.check.interval.ms": "600000",
        }
        broker = Broker(BrokerConfig(settings))
        server = Server(broker)
        result: dict[str, Any] = {"partitions": partitions}
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            assert await server.wait_ready()
            topic = CreateTopicsRequest.CreatableTopic(
                name="bench", num_partitions=partitions, replication_factor=1)
            created = await broker.cluster.channel.create_topics(
                CreateTopicsRequest(topics=[topic], timeout_ms=30_000))
            assert created.topics[0].error_code == 0, created
            assert server.http is not None
            port = server.http.port
            idle: list[float] = []
            stop = trio.Event()
            nursery.start_soon(_probe, idle, stop)
            await trio.sleep(1.0)
            stop.set()
            result["idle_lateness_ms"] = {"p99": _pct(idle, 99), "max": max(idle)}
            for path in PATHS:
                lateness: list[float] = []
                stop = trio.Event()
                nursery.start_soon(_probe, lateness, stop)
                times = await trio.to_thread.run_sync(_get_many, port, path, requests)
                stop.set()
                result[path] = {
                    "get_ms_median": statistics.median(times),
                    "get_ms_max": max(times),
                    "lateness_ms_p99": _pct(lateness, 99),
                    "lateness_ms_max": max(lateness),
                }
            server.request_shutdown()
        return result


def hook_cost(loops: int = 20_000, runs: int = 5) -> dict[str, float]:
    """CPU-us per call of what the request path always does for the metrics (listener on or
    off): `request_done` for a one-partition Produce answer and for a Fetch (hand-built) answer,
    and `produced` per partition batch - next to a request's whole cost in perf/request_cost.py."""
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.protocol import RequestHeader
    from kafkapy.protocol.messages import FetchRequest, ProduceResponse
    from kafkapy.protocol.raw_response import RawResponse

    stats = BrokerStats()
    produce = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(index=0)])])
    fetch = RawResponse(error_counts={0: 2})
    fetch_request = FetchRequest(replica_id=-1)
    header_p = RequestHeader(0, 9, 1, "bench")
    header_f = RequestHeader(1, 12, 2, "bench")
    cases = {
        "request_done(Produce, 1 partition)": lambda: stats.request_done(
            header_p, None, produce, 0.1, 1.0, principal="User:ANONYMOUS", peer="p", listener="PLAINTEXT"),
        "request_done(Fetch)": lambda: stats.request_done(
            header_f, fetch_request, fetch, 0.1, 1.0, principal="User:ANONYMOUS", peer="p", listener="PLAINTEXT"),
        "produced(topic, bytes, messages)": lambda: stats.produced("t", 81920, 80),
    }
    out = {}
    for name, fn in cases.items():
        times = []
        for _ in range(runs):
            started = time.process_time()
            for _ in range(loops):
                fn()
            times.append((time.process_time() - started) / loops * 1e6)
        out[name] = statistics.median(times)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,100,1000")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "http_bench.json")
    args = parser.parse_args(argv)
    hooks = hook_cost()
    for name, us in hooks.items():
        print(f"request path hook {name}: {us:.2f} CPU-us per call")
    results = []
    for count in (int(p) for p in args.partitions.split(",")):
        r = trio.run(measure, count, args.requests)
        results.append(r)
        idle = r["idle_lateness_ms"]
        print(f"{count} partitions: loop lateness with no GETs p99 {idle['p99']:.2f} ms, max {idle['max']:.2f} ms")
        for path in PATHS:
            f = r[path]
            print(
                f"  GET {path:22} median {f['get_ms_median']:7.1f} ms, max {f['get_ms_max']:7.1f} ms;"
                f" loop lateness meanwhile p99 {f['lateness_ms_p99']:6.2f} ms, max {f['lateness_ms_max']:6.2f} ms"
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {"requests": args.requests, "hook_cpu_us": hooks, "results": results}
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
