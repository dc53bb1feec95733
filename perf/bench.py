"""Drive any Kafka-compatible broker with librdkafka (confluent-kafka) and report speed.

Usage:
    perf/bench.py [BOOTSTRAP] [--vs BOOTSTRAP2] [--runs N] [--json out.json]

Without BOOTSTRAP it launches `python -m kafkapy serve` on a free port with a temporary data dir
(and measures its startup time to the readiness line). With --vs it alternates A/B runs against
two brokers (ABBA order) and reports B/A ratios, so drift of a shared machine hits both alike.

Figures per run (medians over --runs are reported):
- produce throughput, 1 KiB values, linger.ms=5, batch.size=1 MiB, for acks=1 and acks=all;
- consume throughput of that topic from the beginning (first to last message; the time from
  assign() to the first message is reported on its own);
- produce-ack latency p50/p99 and end-to-end latency p50/p99 at a fixed 5,000 msg/s (acks=all,
  linger.ms=5 as librdkafka defaults, consumer long-polling in its own process), plus the ack
  p99 of the worst one-second window and the largest Dirty + Writeback page cache meanwhile;
- client CPU share (process CPU seconds / wall seconds, in % of one core) next to each figure:
  near 100% per librdkafka thread means the client, not the broker, may be the bottleneck;
- broker CPU share over the same phase (from /proc/PID/stat of the process listening on the
  bootstrap port, found with `ss`, or given with --pid-a/--pid-b), so a throughput figure can be
  read as broker CPU per message.

Spread: the table shows the median and, per figure, min-max over the runs.
--profile OUT launches `py-spy record --format raw` on the kafkapy it launched for the whole
measurement (summarise with perf/profile_summary.py).
--c-consumer PATH runs the consume phase with perf/cdriver/consume.c (built with
`make -C perf/cdriver wheel`) instead of the Python client, which is the limit there.
--c-producer PATH runs both produce phases with perf/cdriver/produce.c (same build, same producer
settings) instead of the Python produce() loop.

--launch-b launches a second kafkapy as broker B (with --b-broker-arg, e.g. `--b-broker-arg=--http
--b-broker-arg=127.0.0.1:0`, or from another source tree with --b-root) and alternates A/B runs
against the two: e.g. the HTTP listener on vs off in one run. --scrape-interval S then GETs /metrics and /api/status of every launched broker with an
HTTP listener every S seconds during its runs (a Prometheus scraper plus an open status page).

--compression none|gzip|snappy|lz4|zstd sets the producer's compression.type (the batches the
broker decompresses and walks record by record before the append).

Every loop stops by count and by time (--max-seconds per phase).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parent.parent
READY_RE = re.compile(r"kafkapy ready: listening on (?P<host>[^\s:]+):(?P<port>\d+)")
VALUE_BYTES = 1024
LATENCY_RATE = 5000
# librdkafka's own default: what an application that never tunes linger gets.
LATENCY_LINGER_MS = 5


@dataclass
class Params:
    messages: int
    latency_seconds: float
    partitions: int
    max_seconds: float
    #: path of perf/cdriver's consume binary: used for the consume phase instead of confluent-kafka
    c_consumer: str | None = None
    #: producer linger.ms of the throughput phases (scale_bench varies it for 1,000 partitions)
    linger_ms: int = 5
    #: path of perf/cdriver's produce binary: used for the produce phases instead of confluent-kafka
    c_producer: str | None = None
    #: producer compression.type of the produce and latency phases (none, gzip, snappy, lz4, zstd)
    compression: str = "none"
    #: producer linger.ms of the latency phase: 1 makes about one request per message (the
    #: broker's per-request cost), librdkafka's default 5 batches a few
    latency_linger_ms: int = LATENCY_LINGER_MS


COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")

#: pid of the broker under test, set per target before its run (None: unknown, not reported)
BROKER_PID: int | None = None
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_cpu_seconds(pid: int | None) -> float:
    """utime + stime of `pid` (all its threads) from /proc; NaN when it cannot be read."""
    if pid is None:
        return float("nan")
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def listener_pid(bootstrap: str) -> int | None:
    """The pid listening on the bootstrap's port on this machine (`ss -ltnp`), if visible."""
    port = bootstrap.rsplit(":", 1)[-1]
    try:
        out = subprocess.run(
            ["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"pid=(\d+)", out)
    return int(match[1]) if match else None


@dataclass
class Meter:
    """Wall time, this process's CPU time (all librdkafka threads included) and the broker's CPU
    time over a phase."""

    wall0: float = field(default_factory=time.perf_counter)
    cpu0: float = field(default_factory=lambda: _cpu_seconds())
    broker_pid: int | None = field(default_factory=lambda: BROKER_PID)
    broker0: float = field(default_factory=lambda: _proc_cpu_seconds(BROKER_PID))

    def stop(self) -> tuple[float, float]:
        wall = time.perf_counter() - self.wall0
        cpu = _cpu_seconds() - self.cpu0
        self.broker_pct = 100.0 * (_proc_cpu_seconds(self.broker_pid) - self.broker0) / wall if wall > 0 else 0.0
        return wall, (100.0 * cpu / wall if wall > 0 else 0.0)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


# --- broker launch -------------------------------------------------------------------------------


class LaunchedBroker:
    """`python -m kafkapy serve` on a free port with a temporary data dir, stopped with SIGTERM."""

    def __init__(
        self, data_dir: Path, timeout_s: float = 30.0, extra_args: list[str] | None = None, root: Path = ROOT
    ) -> None:
        """`root`: the source tree whose kafkapy runs (another one, e.g. a `git archive` of an older
        commit, for A/B runs; `python -m` puts the working directory first on sys.path)."""
        cmd = [
            sys.executable, "-m", "kafkapy", "serve",
            "--listeners", "PLAINTEXT://127.0.0.1:0", "--data-dir", str(data_dir), *(extra_args or []),
        ]  # fmt: skip
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout is not None
        self.bootstrap = ""
        self.http_url: str | None = None
        deadline = started + timeout_s
        lines: list[str] = []
        while time.perf_counter() < deadline:
            raw = self.proc.stdout.readline()
            if not raw:
                break
            line = raw.decode(errors="replace")
            lines.append(line)
            match = READY_RE.search(line)
            if match:
                self.startup_s = time.perf_counter() - started
                self.bootstrap = f"{match['host']}:{match['port']}"
                http = re.search(r"HTTP on (http://\S+/)", line)
                self.http_url = http.group(1) if http else None
                # Keep draining the log so a chatty broker never blocks on a full pipe.
                threading.Thread(target=self._drain, daemon=True).start()
                return
        self.proc.kill()
        raise SystemExit("kafkapy did not print its readiness line:\n" + "".join(lines[-30:]))

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for _ in self.proc.stdout:
            pass

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Scraper:
    """GETs `url`metrics and `url`api/status every `interval_s` in a thread until stopped."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url, self.interval_s = url, interval_s
        self.scrapes = 0
        self.seconds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import urllib.request

        while not self._stop.wait(self.interval_s):
            for path in ("metrics", "api/status"):
                started = time.perf_counter()
                with urllib.request.urlopen(self.url + path, timeout=30) as response:
                    response.read()
                self.seconds.append(time.perf_counter() - started)
            self.scrapes += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def measure_startup(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="kafkapy-bench-") as tmp:
            broker = LaunchedBroker(Path(tmp))
            times.append(broker.startup_s)
            broker.stop()
    return times


# --- phases --------------------------------------------------------------------------------------


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ].result(30)
    return name


def produce_throughput(bootstrap: str, topic: str, acks: str, p: Params) -> dict[str, float]:
    if p.c_producer:
        return c_produce_throughput(bootstrap, topic, acks, p)
    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": p.linger_ms,
            "batch.size": 1024 * 1024,
            "enable.idempotence": False,
            "queue.buffering.max.kbytes": 256 * 1024,
            "compression.type": p.compression,
        }
    )
    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    delivered = 0
    errors = 0

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        nonlocal delivered, errors
        if err is None:
            delivered += 1
        else:
            errors += 1

    meter = Meter()
    deadline = time.perf_counter() + p.max_seconds
    sent = 0
    while sent < p.messages and time.perf_counter() < deadline:
        try:
            prod.produce(topic, value=value, key=str(sent % 1000).encode(), on_delivery=on_delivery)
            sent += 1
        except BufferError:
            prod.poll(0.005)
    prod.flush(max(1.0, deadline - time.perf_counter() + 10))
    wall, cpu = meter.stop()
    return {
        "msgs_per_s": delivered / wall,
        "mib_per_s": delivered * VALUE_BYTES / wall / 2**20,
        "delivered": delivered,
        "errors": errors,
        "client_cpu_pct": cpu,
        "broker_cpu_pct": meter.broker_pct,
    }


def c_produce_throughput(bootstrap: str, topic: str, acks: str, p: Params) -> dict[str, float]:
    """A produce phase with perf/cdriver/produce.c: the same producer settings, no Python per
    message. Rate and client CPU are the driver's own, first produce() to the end of flush(); the
    broker's CPU is taken over the driver's whole life (connection set-up and close included) and
    divided by that same window, so brk% may read slightly high."""
    argv = [bootstrap, topic, str(p.messages), acks, str(p.linger_ms), str(p.max_seconds)]
    r, secs, cpu = _run_c_driver("C producer", p.c_producer, argv, p.max_seconds)
    return {
        "msgs_per_s": r["delivered"] / secs,
        "mib_per_s": r["delivered"] * VALUE_BYTES / secs / 2**20,
        "delivered": r["delivered"],
        "errors": r["errors"],
        **cpu,
    }


def _run_c_driver(
    what: str, path: str | None, argv: list[str], max_seconds: float
) -> tuple[dict[str, Any], float, dict[str, float]]:
    """Run one perf/cdriver binary and read its JSON line: (result, its own measured seconds,
    client and broker CPU % over those seconds). The broker's CPU is taken over the driver's
    whole life (set-up and close included), so brk% may read slightly high."""
    meter = Meter()
    out = subprocess.run(
        [path or "", *argv], capture_output=True, text=True, check=False, timeout=max_seconds + 30
    )
    wall, _ = meter.stop()
    if not out.stdout.strip():
        raise RuntimeError(f"{what} failed ({out.returncode}): {out.stderr.strip()}")
    r = json.loads(out.stdout)
    secs = float(r["seconds"]) or float("nan")
    broker_s = meter.broker_pct * wall / 100.0
    cpu = {
        "client_cpu_pct": 100.0 * (r["cpu_user_s"] + r["cpu_sys_s"]) / secs,
        "broker_cpu_pct": 100.0 * broker_s / secs if meter.broker_pid is not None else float("nan"),
    }
    return r, secs, cpu


def consume_throughput(bootstrap: str, topic: str, expected: int, p: Params) -> dict[str, float]:
    """Steady-state rate, timed from the first message to the last: connection set-up and offset
    lookup (about a second with librdkafka, whatever the broker) are reported separately as
    `first_message_ms` instead of diluting the rate."""
    if p.c_consumer:
        return c_consume_throughput(bootstrap, topic, expected, p)
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
            # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) once its local
            # queue passes queued.max.messages.kbytes (64 MiB): a broker fast enough to fill it
            # would then be measured with a 1 s pause in the middle (bimodal 140k/450k msg/s).
            "fetch.queue.backoff.ms": 10,
        }
    )
    assigned = time.perf_counter()
    cons.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(p.partitions)])
    got = 0
    meter: Meter | None = None
    first_message_ms = float("nan")
    deadline = time.perf_counter() + p.max_seconds
    while got < expected and time.perf_counter() < deadline:
        # consume() blocks until it has num_messages or the timeout passes: never ask for more
        # than are left, or the last call would add up to the whole timeout to the wall time.
        batch = cons.consume(num_messages=min(10000, expected - got), timeout=0.5)
        if batch and meter is None:
            meter = Meter()
            first_message_ms = (time.perf_counter() - assigned) * 1000
        got += sum(1 for msg in batch if msg.error() is None)
    wall, cpu = meter.stop() if meter is not None else (float("nan"), float("nan"))
    cons.close()
    return {
        "msgs_per_s": got / wall,
        "mib_per_s": got * VALUE_BYTES / wall / 2**20,
        "consumed": got,
        "first_message_ms": first_message_ms,
        "client_cpu_pct": cpu,
        "broker_cpu_pct": meter.broker_pct if meter is not None else float("nan"),
    }


def c_consume_throughput(bootstrap: str, topic: str, expected: int, p: Params) -> dict[str, float]:
    """The consume phase with perf/cdriver/consume.c (same librdkafka settings, no Python per
    message). Rate and client CPU are the driver's own, first message to last; the broker's CPU is
    taken over the driver's whole life (it idles during connect and close) and divided by the same
    first-to-last time, so brk% may read slightly high."""
    argv = [bootstrap, topic, str(expected), str(p.max_seconds)]
    r, secs, cpu = _run_c_driver("C consumer", p.c_consumer, argv, p.max_seconds)
    return {
        "msgs_per_s": r["msgs"] / secs,
        "mib_per_s": r["bytes"] / secs / 2**20,
        "consumed": r["msgs"],
        "first_message_ms": r["first_message_ms"],
        **cpu,
    }


def _now_ns() -> int:
    """CLOCK_MONOTONIC: one clock for every process on the machine, so the producer's send time
    can be compared with the consumer process's receive time."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _latency_consumer(bootstrap: str, topic: str, total: int, max_seconds: float, ready: Any, out: Any) -> None:
    """Runs in its own process: a consumer sharing the producer's GIL would see its messages late
    by up to the interpreter's switch interval (5 ms) whenever the producer thread is busy."""
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "fetch.min.bytes": 1,
        }
    )
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    cons.poll(0.5)
    ready.set()
    cpu0 = _cpu_seconds()
    e2e_ms: list[float] = []
    deadline = time.perf_counter() + max_seconds
    # poll() per message, not consume(n, timeout): consume() holds messages back until it has
    # n of them or the timeout passes, which would add up to 100 ms to every latency.
    while len(e2e_ms) < total and time.perf_counter() < deadline:
        msg = cons.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        value = msg.value()
        if value is not None:
            e2e_ms.append((_now_ns() - int(value[:20])) / 1e6)
    cons.close()
    out.send((e2e_ms, _cpu_seconds() - cpu0))
    out.close()


def _dirty_mib() -> float:
    """Dirty + Writeback page cache of the whole machine (MiB): a large value during the latency
    phase means the kernel is writing a burst back meanwhile (see perf/README.md, latency after
    heavy writes). 0 where /proc/meminfo is missing."""
    try:
        with open("/proc/meminfo", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        return sum(int(fields[k].split()[0]) for k in (b"Dirty", b"Writeback")) / 1024
    except (OSError, KeyError, ValueError):
        return 0.0


def _worst_window_p99(sent_ns: list[int], latencies: list[float]) -> float:
    """p99 of the worst one-second window (by send time, windows with >= 100 acks): a stall of a
    second or two shows here even when a long phase's overall p99 hides it."""
    if not sent_ns:
        return float("nan")
    first = min(sent_ns)
    windows: dict[int, list[float]] = {}
    for ns, lat in zip(sent_ns, latencies, strict=True):
        windows.setdefault((ns - first) // 1_000_000_000, []).append(lat)
    full = [w for w in windows.values() if len(w) >= 100] or list(windows.values())
    return max(_percentile(w, 99) for w in full)


def latency(bootstrap: str, p: Params) -> dict[str, float]:
    """Paced producer at LATENCY_RATE msg/s plus a consumer process; values carry the send time.

    Pacing sends what is due once per millisecond and waits in `poll()` (which also serves the
    delivery reports at once) instead of spinning, so the client stays light on the CPU it shares
    with the broker."""
    topic = create_topic(bootstrap, 1)
    total = int(LATENCY_RATE * p.latency_seconds)
    ack_ms: list[float] = []
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    receive, send = ctx.Pipe(duplex=False)
    consumer = ctx.Process(
        target=_latency_consumer,
        args=(bootstrap, topic, total, p.latency_seconds + p.max_seconds, ready, send),
        daemon=True,
    )
    consumer.start()
    send.close()
    ready.wait(30)
    prod = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": p.latency_linger_ms,
            "enable.idempotence": False,
            "compression.type": p.compression,
        }
    )
    pad = b"x" * (VALUE_BYTES - 20)

    ack_sent_ns: list[int] = []

    def reporter(sent_ns: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                ack_ms.append((_now_ns() - sent_ns) / 1e6)
                ack_sent_ns.append(sent_ns)

        return on_delivery

    meter = Meter()
    start = time.perf_counter()
    deadline = start + p.latency_seconds + p.max_seconds
    sent = 0
    dirty_max = _dirty_mib()
    next_dirty = start + 0.1
    while sent < total:
        now = time.perf_counter()
        if now > deadline:
            break
        if now >= next_dirty:
            dirty_max = max(dirty_max, _dirty_mib())
            next_dirty = now + 0.1
        due = min(total, int((now - start) * LATENCY_RATE) + 1)
        while sent < due:
            sent_ns = _now_ns()
            prod.produce(topic, value=b"%020d" % sent_ns + pad, on_delivery=reporter(sent_ns))
            sent += 1
        # Wake once per millisecond (a tick's worth of messages), not once per message; librdkafka
        # takes whole milliseconds, so a shorter timeout would be 0: a busy loop eating a core.
        wait = start + sent / LATENCY_RATE - time.perf_counter()
        prod.poll(0.001 if wait > 0 else 0)
    prod.flush(30)
    e2e_ms: list[float] = []
    consumer_cpu = 0.0
    try:
        if receive.poll(p.max_seconds + 15):
            e2e_ms, consumer_cpu = receive.recv()
    except EOFError:
        print("latency consumer process died", file=sys.stderr)
    wall, cpu = meter.stop()
    cpu += 100.0 * consumer_cpu / wall  # the consumer process's share, from its own rusage
    consumer.join(15)
    if consumer.is_alive():
        consumer.kill()
    return {
        "rate_msgs_per_s": LATENCY_RATE,
        "acked": len(ack_ms),
        "consumed": len(e2e_ms),
        "ack_p50_ms": _percentile(ack_ms, 50),
        "ack_p99_ms": _percentile(ack_ms, 99),
        "ack_worst_1s_p99_ms": _worst_window_p99(ack_sent_ns, ack_ms),
        "dirty_max_mib": dirty_max,
        "e2e_p50_ms": _percentile(e2e_ms, 50),
        "e2e_p99_ms": _percentile(e2e_ms, 99),
        "ack_p999_ms": _percentile(ack_ms, 99.9),
        "e2e_p999_ms": _percentile(e2e_ms, 99.9),
        "e2e_max_ms": max(e2e_ms, default=0.0),
        "client_cpu_pct": cpu,
        "broker_cpu_pct": meter.broker_pct,
    }


def one_run(bootstrap: str, p: Params) -> dict[str, dict[str, float]]:
    topic = create_topic(bootstrap, p.partitions)
    result = {
        "produce_acks1": produce_throughput(bootstrap, topic, "1", p),
        "produce_acksall": produce_throughput(bootstrap, topic, "all", p),
    }
    expected = int(result["produce_acks1"]["delivered"] + result["produce_acksall"]["delivered"])
    result["consume"] = consume_throughput(bootstrap, topic, expected, p)
    result["latency_5k"] = latency(bootstrap, p)
    return result


# --- reporting -----------------------------------------------------------------------------------

FIGURES = [
    ("produce_acks1", "msgs_per_s", "produce acks=1 (msg/s)"),
    ("produce_acks1", "mib_per_s", "produce acks=1 (MiB/s)"),
    ("produce_acksall", "msgs_per_s", "produce acks=all (msg/s)"),
    ("produce_acksall", "mib_per_s", "produce acks=all (MiB/s)"),
    ("consume", "msgs_per_s", "consume from beginning (msg/s)"),
    ("consume", "mib_per_s", "consume from beginning (MiB/s)"),
    ("consume", "first_message_ms", "consume: assign to 1st message (ms)"),
    ("latency_5k", "ack_p50_ms", "produce-ack p50 @5k/s (ms)"),
    ("latency_5k", "ack_p99_ms", "produce-ack p99 @5k/s (ms)"),
    ("latency_5k", "ack_worst_1s_p99_ms", "produce-ack worst 1 s p99 (ms)"),
    ("latency_5k", "e2e_p50_ms", "end-to-end p50 @5k/s (ms)"),
    ("latency_5k", "e2e_p99_ms", "end-to-end p99 @5k/s (ms)"),
    ("latency_5k", "ack_p999_ms", "produce-ack p99.9 @5k/s (ms)"),
    ("latency_5k", "e2e_p999_ms", "end-to-end p99.9 @5k/s (ms)"),
    ("latency_5k", "e2e_max_ms", "end-to-end max @5k/s (ms)"),
    ("latency_5k", "dirty_max_mib", "latency: Dirty+Writeback max (MiB)"),
]


def medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for phase in runs[0]:
        out[phase] = {k: statistics.median(r[phase][k] for r in runs) for k in runs[0][phase]}
    return out


def spreads(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, list[float]]]:
    """[min, max] over the runs per figure."""
    return {
        phase: {k: [min(r[phase][k] for r in runs), max(r[phase][k] for r in runs)] for k in runs[0][phase]}
        for phase in runs[0]
    }


def _fmt(value: float) -> str:
    return f"{value / 1000:.1f}k" if abs(value) >= 10_000 else f"{value:.1f}"


def print_table(targets: dict[str, dict[str, Any]], startup: list[float] | None) -> None:
    names = list(targets)
    header = f"{'figure':34}" + "".join(
        f"{n + ' median':>13}{'min-max':>17}{'cli%':>6}{'brk%':>6}" for n in names
    )
    if len(names) == 2:
        header += f"{'B/A':>7}"
    print(header)
    print("-" * len(header))
    for phase, key, label in FIGURES:
        row = f"{label:34}"
        vals = []
        for n in names:
            med = targets[n]["median"][phase]
            lo, hi = targets[n]["spread"][phase][key]
            vals.append(med[key])
            spread = f"{_fmt(lo)}-{_fmt(hi)}"
            row += f"{_fmt(med[key]):>13}{spread:>17}{med['client_cpu_pct']:>6.0f}{med['broker_cpu_pct']:>6.0f}"
        if len(vals) == 2:
            row += f"{(vals[1] / vals[0] if vals[0] else float('nan')):>7.2f}"
        print(row)
    if startup:
        print(f"{'kafkapy serve startup to ready (s)':34}{statistics.median(startup):>13.2f}"
              f"   (runs: {', '.join(f'{s:.2f}' for s in startup)})")  # fmt: skip
    print("cli% / brk% = client / broker process CPU time over the phase's wall time (100 = one core);")
    print("median over runs, min-max = spread over runs; B/A = ratio of the medians.")


class PySpy:
    """`py-spy record --format raw` attached to the launched broker for the whole measurement."""

    def __init__(self, pid: int, out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        exe = Path(sys.executable).with_name("py-spy")
        self.proc = subprocess.Popen(
            # --nonblocking: never pause the broker to sample it, or its latencies would suffer
            [str(exe), "record", "--nonblocking", "--rate", "250", "--format", "raw", "-o", str(out), "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.out = out

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        print(f"py-spy profile: {self.out} (perf/profile_summary.py {self.out})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap", nargs="?", help="broker A (default: launch kafkapy)")
    parser.add_argument("--vs", metavar="BOOTSTRAP2", help="broker B, run alternately with A")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "bench.json")
    parser.add_argument("--messages", type=int, default=100_000, help="per produce phase")
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    parser.add_argument("--latency-linger-ms", type=int, default=LATENCY_LINGER_MS,
                        help="producer linger.ms of the latency phase (1: about one request per message)")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap per phase")
    parser.add_argument("--pid-a", type=int, help="broker A's pid for its CPU share (default: ss)")
    parser.add_argument("--pid-b", type=int, help="broker B's pid (default: found with ss)")
    parser.add_argument("--profile", type=Path, help="py-spy raw profile of the launched kafkapy")
    parser.add_argument("--broker-arg", action="append", default=[],
                        help="extra argument for the launched kafkapy (repeatable), e.g. --broker-arg=--memory")
    parser.add_argument("--launch-b", action="store_true",
                        help="launch a second kafkapy as broker B (A/B against the launched A)")
    parser.add_argument("--b-broker-arg", action="append", default=[],
                        help="extra argument for the launched broker B (repeatable)")
    parser.add_argument("--b-root", type=Path, default=ROOT,
                        help="source tree broker B runs from (e.g. a git archive of an older commit)")
    parser.add_argument("--scrape-interval", type=float, default=0.0,
                        help="GET /metrics and /api/status of launched brokers with --http this often (s)")
    parser.add_argument("--c-consumer", metavar="PATH",
                        help="consume phase with this perf/cdriver binary (make -C perf/cdriver wheel)")
    parser.add_argument("--c-producer", metavar="PATH",
                        help="produce phases with this perf/cdriver binary (make -C perf/cdriver wheel)")
    parser.add_argument("--compression", choices=COMPRESSIONS, default="none",
                        help="producer compression.type of the produce and latency phases (not with --c-producer)")
    args = parser.parse_args(argv)
    if args.compression != "none" and args.c_producer:
        parser.error("--compression is not passed to perf/cdriver's producer")
    global BROKER_PID
    p = Params(args.messages, args.latency_seconds, args.partitions, args.max_seconds, args.c_consumer,
               c_producer=args.c_producer, compression=args.compression,
               latency_linger_ms=args.latency_linger_ms)

    launched: LaunchedBroker | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    startup: list[float] | None = None
    if args.bootstrap is None:
        startup = measure_startup(args.runs)
        tmp = tempfile.TemporaryDirectory(prefix="kafkapy-bench-")
        launched = LaunchedBroker(Path(tmp.name), extra_args=args.broker_arg)
        startup.append(launched.startup_s)
    bootstraps = {"A": args.bootstrap or (launched.bootstrap if launched else "")}
    launched_b: LaunchedBroker | None = None
    tmp_b: tempfile.TemporaryDirectory[str] | None = None
    if args.launch_b:
        tmp_b = tempfile.TemporaryDirectory(prefix="kafkapy-bench-b-")
        launched_b = LaunchedBroker(Path(tmp_b.name), extra_args=args.b_broker_arg, root=args.b_root)
        args.vs = launched_b.bootstrap
    if args.vs:
        bootstraps["B"] = args.vs
    pids = {
        "A": args.pid_a or (launched.proc.pid if launched else listener_pid(bootstraps["A"])),
        "B": args.pid_b or (launched_b.proc.pid if launched_b else listener_pid(args.vs) if args.vs else None),
    }
    http_urls = {
        name: b.http_url
        for name, b in (("A", launched), ("B", launched_b))
        if b is not None and b.http_url and args.scrape_interval > 0
    }
    scrapes: dict[str, list[float]] = {name: [] for name in http_urls}
    spy = PySpy(launched.proc.pid, args.profile) if args.profile and launched else None
    runs: dict[str, list[dict[str, dict[str, float]]]] = {n: [] for n in bootstraps}
    try:
        for i in range(args.runs):
            # ABBA: odd rounds run B first, so whatever favours the second of a pair (page
            # cache, CPU frequency, a neighbour's load pattern) does not always favour B
            order = list(bootstraps.items())
            for name, bootstrap in order[::-1] if i % 2 else order:
                print(
                    f"run {i + 1}/{args.runs} on {name} ({bootstrap}, pid {pids[name]}) ...",
                    file=sys.stderr,
                    flush=True,
                )
                BROKER_PID = pids[name]
                url = http_urls.get(name)
                scraper = Scraper(url, args.scrape_interval) if url else None
                try:
                    runs[name].append(one_run(bootstrap, p))
                finally:
                    if scraper is not None:
                        scraper.stop()
                        scrapes[name] += scraper.seconds
    finally:
        if spy is not None:
            spy.stop()
        for broker in (launched, launched_b):
            if broker is not None:
                broker.stop()
        for directory in (tmp, tmp_b):
            if directory is not None:
                directory.cleanup()

    targets: dict[str, dict[str, Any]] = {
        n: {
            "bootstrap": bootstraps[n],
            "pid": pids[n],
            "runs": runs[n],
            "median": medians(runs[n]),
            "spread": spreads(runs[n]),
        }
        for n in bootstraps
    }
    print_table(targets, startup)
    for name, times in scrapes.items():
        if times:
            print(f"{name}: {len(times)} HTTP GETs of /metrics and /api/status, median "
                  f"{statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")
    report: dict[str, Any] = {
        "params": {
            **vars(p),
            "value_bytes": VALUE_BYTES,
            "linger_ms": 5,
            "batch_size": 1024 * 1024,
            "latency_rate": LATENCY_RATE,
            "latency_linger_ms": LATENCY_LINGER_MS,
            "runs": args.runs,
            "launched_kafkapy": launched is not None,
            "launched_b": launched_b is not None,
            "b_broker_args": args.b_broker_arg,
            "b_root": str(args.b_root),
            "scrape_interval_s": args.scrape_interval,
        },
        "targets": targets,
        "startup_s": {"runs": startup, "median": statistics.median(startup)} if startup else None,
        "http_get_seconds": scrapes,
    }
    if len(targets) == 2:
        report["ratios_b_over_a"] = {
            f"{phase}.{key}": targets["B"]["median"][phase][key]
            / targets["A"]["median"][phase][key]
            for phase, key, _ in FIGURES
            if targets["A"]["median"][phase][key]
        }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
