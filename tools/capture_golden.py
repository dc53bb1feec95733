"""Record golden request/response frames from real Kafka clients talking to a kafkapy broker.

Why: a codec that only round-trips its own output can be consistently wrong. Frames written by
librdkafka (confluent-kafka, and kcat on Debian's older librdkafka), kafka-python and aiokafka are
ground truth for what the wire looks like, and `tests/protocol/test_golden.py` checks that our codec decodes them to the values each
client was told to send and re-encodes them to the same bytes.

How: start `python -m kafkapy serve --memory` advertising a recording TCP proxy's address (so
clients reconnect through the proxy after bootstrap), run a short scripted session per client
through the proxy, split both directions into frames, pair responses with requests by
correlation id, keep a small representative selection and write

    tests/protocol/golden/<api>_<request|response>_v<N>_<n>.hex   (frame without size prefix)
    tests/protocol/golden/<api>_<request|response>_v<N>_<n>.json  (client, expected values)

Expected values in the sidecar come from the session script (the client id, topic, acks,
compression, record values it configured), never from decoding with our codec.

Usage: .venv/bin/python tools/capture_golden.py [--out DIR]   (needs a working broker and kcat)

Responses in the fixtures are kafkapy's own answers at capture time; re-capturing after a broker
change rewrites them (and the ports/timestamps inside), which is expected churn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkapy.protocol import ApiKey  # noqa: E402

READY_RE = re.compile(r"kafkapy ready: listening on (?P<host>[^\s:]+):(?P<port>\d+)")
MAX_FRAME_HEX_BYTES = 32 * 1024
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS_ALL = -1
FETCH_MAX_WAIT_MS = 321
PRODUCE_TIMEOUT_MS = 23456
RETENTION_MS = "86400000"


# --- recording proxy -----------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request and (unless acks=0 or the connection closed) its response."""

    label: str
    phase: str
    expect: dict[str, Any]
    api_key: int
    api_version: int
    correlation_id: int
    request: bytes
    response: bytes | None = None


@dataclass
class Recorder:
    """Current session label/phase plus every exchange seen by the proxy, in order."""

    label: str = ""
    phase: str = ""
    expect: dict[str, Any] = field(default_factory=dict)
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_phase(self, label: str, phase: str, **expect: Any) -> None:
        with self.lock:
            self.label, self.phase, self.expect = label, phase, dict(expect)


def _frames(sock: socket.socket, forward: socket.socket) -> Iterator[bytes]:
    """Yield complete frames (without size prefix) read from `sock`, forwarding all bytes.

    Frames are yielded (recorded) *before* their bytes are forwarded: otherwise the peer could
    get its answer and the session move on to its next phase before the recorder has seen the
    frame, labelling it with the wrong phase.
    """
    buf = b""
    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        buf += data
        while len(buf) >= 4:
            (size,) = struct.unpack_from(">i", buf)
            if size < 0 or len(buf) < 4 + size:
                break
            yield buf[4 : 4 + size]
            buf = buf[4 + size :]
        try:
            forward.sendall(data)
        except OSError:
            return


def _pump_requests(
    client: socket.socket, upstream: socket.socket, rec: Recorder, pending: dict[int, Exchange]
) -> None:
    for frame in _frames(client, upstream):
        if len(frame) < 8:
            continue
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
        with rec.lock:
            ex = Exchange(
                rec.label, rec.phase, rec.expect, api_key, api_version, correlation_id, frame
            )
            rec.exchanges.append(ex)
            pending[correlation_id] = ex
    upstream.close()


def _pump_responses(
    upstream: socket.socket, client: socket.socket, rec: Recorder, pending: dict[int, Exchange]
) -> None:
    for frame in _frames(upstream, client):
        (correlation_id,) = struct.unpack_from(">i", frame)
        with rec.lock:
            ex = pending.pop(correlation_id, None)
            if ex is not None:
                ex.response = frame
    client.close()


def run_proxy(listener: socket.socket, target: tuple[str, int], rec: Recorder) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        upstream = socket.create_connection(target)
        pending: dict[int, Exchange] = {}
        threading.Thread(
            target=_pump_requests, args=(client, upstream, rec, pending), daemon=True
        ).start()
        threading.Thread(
            target=_pump_responses, args=(upstream, client, rec, pending), daemon=True
        ).start()


# --- client sessions -----------------------------------------------------------------------------


def _values(client: str, codec: str) -> list[str]:
    """Small but repetitive: librdkafka sends a batch uncompressed when compressing would not
    shrink it, and the fixtures must hold real compressed batches."""
    return [f"{client}-{codec}-value-{i}-" * 6 for i in range(3)]


def session_confluent(bootstrap: str, rec: Recorder) -> str:
    import confluent_kafka
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType  # type: ignore[attr-defined]

    label, client_id, topic = "confluent-kafka", "golden-confluent", "golden-confluent"
    base = {"client_id": client_id, "topic": topic}
    rec.set_phase(
        label, "admin-create", **base, num_partitions=1, configs={"retention.ms": RETENTION_MS}
    )
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    admin.create_topics(
        [
            NewTopic(
                topic, num_partitions=1, replication_factor=1, config={"retention.ms": RETENTION_MS}
            )
        ]
    )[topic].result(15)
    all_values: list[str] = []
    for codec in CODECS:
        values = _values(label, codec)
        all_values += values
        rec.set_phase(
            label,
            f"produce-{codec}",
            **base,
            acks=ACKS_ALL,
            compression=codec,
            values=values,
            timeout_ms=PRODUCE_TIMEOUT_MS,
        )
        prod = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 50,
                "enable.idempotence": False,
                "request.timeout.ms": PRODUCE_TIMEOUT_MS,
            }
        )
        for i, value in enumerate(values):
            prod.produce(topic, key=f"k{i}".encode(), value=value.encode(), headers=[("h", b"v")])
        assert prod.flush(15) == 0
    rec.set_phase(label, "consume", **base, values=all_values, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": "golden",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": FETCH_MAX_WAIT_MS,
            "enable.partition.eof": True,
        }
    )
    cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    _drain_confluent(cons, len(all_values))
    rec.set_phase(label, "offsets-for-times", **base)
    cons.offsets_for_times([TopicPartition(topic, 0, 0)], timeout=10)
    cons.close()
    rec.set_phase(label, "admin-describe", **base)
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    next(iter(futures.values())).result(15)
    rec.set_phase(label, "admin-delete", **base)
    admin.delete_topics([topic])[topic].result(15)
    return f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"


def _drain_confluent(cons: Any, expected: int) -> None:
    got, deadline = 0, time.monotonic() + 20
    while got < expected and time.monotonic() < deadline:
        msg = cons.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
    assert got == expected, f"confluent session consumed {got} of {expected}"


def session_kafka_python(bootstrap: str, rec: Recorder) -> str:
    import kafka  # type: ignore[import-untyped]
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import (  # type: ignore[import-untyped]
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
    )

    label, client_id, topic = "kafka-python", "golden-kafka-python", "golden-kafka-python"
    base = {"client_id": client_id, "topic": topic}
    rec.set_phase(
        label, "admin-create", **base, num_partitions=1, configs={"retention.ms": RETENTION_MS}
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
    admin.create_topics(
        {
            topic: {
                "num_partitions": 1,
                "replication_factor": 1,
                "configs": {"retention.ms": RETENTION_MS},
            }
        }
    )
    all_values: list[str] = []
    for codec in CODECS:
        values = _values(label, codec)
        all_values += values
        rec.set_phase(
            label,
            f"produce-{codec}",
            **base,
            acks=ACKS_ALL,
            compression=codec,
            values=values,
            timeout_ms=PRODUCE_TIMEOUT_MS,
        )
        prod = KafkaProducer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            acks="all",
            linger_ms=50,
            enable_idempotence=False,
            request_timeout_ms=PRODUCE_TIMEOUT_MS,
            compression_type=None if codec == "none" else codec,
        )
        futures = [
            prod.send(topic, key=f"k{i}".encode(), value=v.encode(), headers=[("h", b"v")])
            for i, v in enumerate(values)
        ]
        prod.flush(15)
        for fut in futures:
            fut.get(5)
        prod.close(5)
    rec.set_phase(label, "consume", **base, values=all_values, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
    cons = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
    )
    tp = TopicPartition(topic, 0)
    cons.assign([tp])
    cons.seek_to_beginning(tp)
    got, deadline = 0, time.monotonic() + 20
    while got < len(all_values) and time.monotonic() < deadline:
        got += sum(len(r) for r in cons.poll(timeout_ms=200).values())
    assert got == len(all_values), f"kafka-python session consumed {got}"
    rec.set_phase(label, "offsets-for-times", **base)
    cons.offsets_for_times({tp: 0})
    cons.close()
    rec.set_phase(label, "admin-describe", **base)
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    rec.set_phase(label, "admin-delete", **base)
    admin.delete_topics([topic])
    admin.close()
    return f"kafka-python {kafka.__version__}"


def session_aiokafka(bootstrap: str, rec: Recorder) -> str:
    import aiokafka  # type: ignore[import-untyped]
    from aiokafka import (
        AIOKafkaConsumer,
        AIOKafkaProducer,
        TopicPartition,
    )
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
    from aiokafka.admin.config_resource import (  # type: ignore[import-untyped]
        ConfigResource,
        ConfigResourceType,
    )

    label, client_id, topic = "aiokafka", "golden-aiokafka", "golden-aiokafka"
    base = {"client_id": client_id, "topic": topic}

    async def session() -> None:
        rec.set_phase(
            label, "admin-create", **base, num_partitions=1, configs={"retention.ms": RETENTION_MS}
        )
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id)
        await admin.start()
        await admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"retention.ms": RETENTION_MS})]
        )
        all_values: list[str] = []
        for codec in CODECS:
            values = _values(label, codec)
            all_values += values
            rec.set_phase(
                label,
                f"produce-{codec}",
                **base,
                acks=ACKS_ALL,
                compression=codec,
                values=values,
                timeout_ms=PRODUCE_TIMEOUT_MS,
            )
            prod = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                client_id=client_id,
                acks="all",
                linger_ms=50,
                enable_idempotence=False,
                request_timeout_ms=PRODUCE_TIMEOUT_MS,
                compression_type=None if codec == "none" else codec,
            )
            await prod.start()
            futures = [
                await prod.send(
                    topic, key=f"k{i}".encode(), value=v.encode(), headers=[("h", b"v")]
                )
                for i, v in enumerate(values)
            ]
            for fut in futures:
                await fut
            await prod.stop()
        rec.set_phase(
            label, "consume", **base, values=all_values, fetch_max_wait_ms=FETCH_MAX_WAIT_MS
        )
        cons = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            client_id=client_id,
            group_id=None,
            enable_auto_commit=False,
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        await cons.start()
        tp = TopicPartition(topic, 0)
        cons.assign([tp])
        await cons.seek_to_beginning(tp)
        got, deadline = 0, time.monotonic() + 20
        while got < len(all_values) and time.monotonic() < deadline:
            got += sum(len(r) for r in (await cons.getmany(timeout_ms=200)).values())
        assert got == len(all_values), f"aiokafka session consumed {got}"
        rec.set_phase(label, "offsets-for-times", **base)
        await cons.offsets_for_times({tp: 0})
        await cons.stop()
        rec.set_phase(label, "admin-describe", **base)
        await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        rec.set_phase(label, "admin-delete", **base)
        await admin.delete_topics([topic])
        await admin.close()

    asyncio.run(asyncio.wait_for(session(), 60))
    return f"aiokafka {aiokafka.__version__}"


def session_kcat(bootstrap: str, rec: Recorder) -> str:
    """Debian's kcat links an older librdkafka (2.0.2), which picks other API versions."""
    import shutil

    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    kcat = shutil.which("kcat")
    if kcat is None:
        raise SystemExit("kcat is needed for the golden capture (apt-get install kcat)")
    label, client_id, topic = "kcat", "golden-kcat", "golden-kcat"
    base = {"client_id": client_id, "topic": topic}
    common = ["-b", bootstrap, "-X", f"client.id={client_id}", "-q"]
    # kcat has no admin API: the topic comes from another client, outside any recorded phase.
    rec.set_phase("", "setup")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(15)
    rec.set_phase(label, "metadata", **base)
    subprocess.run([kcat, *common, "-L"], check=True, capture_output=True, timeout=30)
    all_values: list[str] = []
    # librdkafka <= 2.11 compresses with gzip/snappy/lz4 only if the broker advertises Produce v0
    # (compat_tests/FINDINGS.md F4, fixed); these fixtures pin that it does.
    for codec in CODECS:
        values = _values(label, codec)
        all_values += values
        rec.set_phase(
            label,
            f"produce-{codec}",
            **base,
            acks=ACKS_ALL,
            compression=codec,
            values=values,
            timeout_ms=PRODUCE_TIMEOUT_MS,
        )
        lines = "".join(f"k{i}:{v}\n" for i, v in enumerate(values)).encode()
        args = ["-P", "-t", topic, "-K:", "-H", "h=v", "-X", "acks=all", "-X", "linger.ms=50"]
        args += ["-X", f"request.timeout.ms={PRODUCE_TIMEOUT_MS}", "-z", codec]
        subprocess.run(
            [kcat, *common, *args], input=lines, check=True, capture_output=True, timeout=30
        )
    rec.set_phase(label, "consume", **base, values=all_values, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
    args = [
        "-C",
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-X",
        f"fetch.wait.max.ms={FETCH_MAX_WAIT_MS}",
    ]
    out = subprocess.run([kcat, *common, *args], check=True, capture_output=True, timeout=30).stdout
    consumed = out.count(b"\n")
    assert consumed == len(all_values), f"kcat session consumed {consumed}"
    rec.set_phase(label, "offsets-for-times", **base)
    subprocess.run(
        [kcat, *common, "-Q", "-t", f"{topic}:0:0"], check=True, capture_output=True, timeout=30
    )
    rec.set_phase("", "teardown")
    admin.delete_topics([topic])[topic].result(15)
    version = subprocess.run([kcat, "-V"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"librdkafka ([0-9.]+)", version)
    return f"kcat (librdkafka {match[1] if match else 'unknown'})"


SESSIONS = [session_confluent, session_kafka_python, session_aiokafka, session_kcat]


# --- selection and output ------------------------------------------------------------------------


def api_name(api_key: int) -> str:
    return ApiKey(api_key).name.lower()


def select(exchanges: list[Exchange]) -> list[Exchange]:
    """A small representative set: per client, the first exchange of each (API, version, phase
    kind); Produce once per codec; Fetch the one with the largest response (it carries records)."""
    chosen: dict[tuple[Any, ...], Exchange] = {}
    for ex in exchanges:
        if ex.response is None or not ex.label or len(ex.request) > MAX_FRAME_HEX_BYTES:
            continue
        if len(ex.response) > MAX_FRAME_HEX_BYTES:
            continue
        if ex.api_key not in set(ApiKey):
            continue
        if ex.api_key == ApiKey.PRODUCE:
            key: tuple[Any, ...] = (ex.label, ex.api_key, ex.api_version, ex.phase)
        elif ex.api_key == ApiKey.FETCH:
            if ex.phase != "consume":
                continue
            key = (ex.label, ex.api_key, ex.api_version)
            prev = chosen.get(key)
            if (
                prev is not None
                and prev.response is not None
                and len(prev.response) >= len(ex.response)
            ):
                continue
            chosen[key] = ex
            continue
        else:
            key = (ex.label, ex.api_key, ex.api_version)
        chosen.setdefault(key, ex)
    return sorted(chosen.values(), key=lambda e: exchanges.index(e))


def write_fixtures(
    out: Path, selected: list[Exchange], clients: dict[str, str], advertised_port: int
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob("*_request_v*_*.*")) + list(out.glob("*_response_v*_*.*")):
        old.unlink()
    counters: dict[tuple[int, int], int] = {}
    written = 0
    for ex in selected:
        n = counters.get((ex.api_key, ex.api_version), 0)
        counters[(ex.api_key, ex.api_version)] = n + 1
        for direction, frame in (("request", ex.request), ("response", ex.response)):
            assert frame is not None
            stem = f"{api_name(ex.api_key)}_{direction}_v{ex.api_version}_{n}"
            (out / f"{stem}.hex").write_text(frame.hex() + "\n")
            sidecar = {
                "client": clients[ex.label],
                "client_label": ex.label,
                "phase": ex.phase,
                "api_key": ex.api_key,
                "api_version": ex.api_version,
                "direction": direction,
                "correlation_id": ex.correlation_id,
                "advertised_port": advertised_port,
                "expect": ex.expect,
            }
            (out / f"{stem}.json").write_text(json.dumps(sidecar, indent=1, sort_keys=True) + "\n")
            written += 1
    return written


def start_broker(advertised_port: int) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    cmd = [
        sys.executable, "-m", "kafkapy", "serve", "--memory",
        "--listeners", "PLAINTEXT://127.0.0.1:0",
        "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{advertised_port}",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    lines: list[str] = []
    while time.monotonic() < deadline:
        raw = proc.stdout.readline()
        if not raw:
            break
        line = raw.decode(errors="replace")
        lines.append(line)
        match = READY_RE.search(line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
            return proc, (match["host"], int(match["port"]))
    proc.kill()
    raise SystemExit("broker did not become ready:\n" + "".join(lines[-30:]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "protocol" / "golden")
    args = parser.parse_args(argv)

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy_port = listener.getsockname()[1]
    proc, target = start_broker(proxy_port)
    rec = Recorder()
    threading.Thread(target=run_proxy, args=(listener, target, rec), daemon=True).start()
    clients: dict[str, str] = {}
    try:
        bootstrap = f"127.0.0.1:{proxy_port}"
        for session in SESSIONS:
            label = session.__name__.removeprefix("session_").replace("_", "-")
            label = {"confluent": "confluent-kafka"}.get(label, label)
            clients[label] = session(bootstrap, rec)
            time.sleep(0.3)  # let trailing responses reach the recorder
    finally:
        listener.close()
        proc.terminate()
        proc.wait(10)
    with rec.lock:
        selected = select(list(rec.exchanges))
    written = write_fixtures(args.out, selected, clients, proxy_port)
    print(f"recorded {len(rec.exchanges)} exchanges, wrote {written} fixtures to {args.out}")
    for ex in selected:
        print(f"  {ex.label:16} {api_name(ex.api_key):22} v{ex.api_version:<3} {ex.phase}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
