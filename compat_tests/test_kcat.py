"""kcat (the Kafka CLI on Debian's librdkafka 2.0.2) against a real kafkapy broker subprocess.

Why kcat as well as confluent-kafka: it links the distribution's older librdkafka, which
negotiates different API versions than current librdkafka, and it is the first tool people
reach for (`kcat -b 127.0.0.1:9092 -L`). The issue requires both to work.

kcat has no admin API. Topics are made by auto-creation (a produce to an unknown topic, which
kcat triggers through Metadata) or, when a test needs several partitions, with confluent-kafka's
AdminClient. Describe/alter config and delete topic cannot be expressed with kcat and are covered
by the other clients' files.

Outside CI a missing kcat skips this module with a visible reason; with CI=true it fails,
because `.ci/run` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from compat_tests.conftest import CODEC_IDS, BrokerProcess, in_ci, stored_codecs, unique_topic

pytestmark = pytest.mark.timeout(90)

N_MESSAGES = 1000
N_PARTITIONS = 3
KCAT_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def kcat() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        if in_ci():
            pytest.fail(
                "kcat is not installed, but CI=true: .ci/run must install it (apt-get install kcat)"
            )
        pytest.skip("kcat not installed (apt-get install kcat); required in CI")
    return path


def run_kcat(
    kcat: str, args: list[str], stdin: bytes | None = None, timeout_s: float = KCAT_TIMEOUT_S
) -> bytes:
    """Run kcat, fail with its stderr on a non-zero exit or a timeout; returns stdout."""
    try:
        proc = subprocess.run(
            [kcat, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"kcat {' '.join(args)} timed out after {timeout_s}s; stderr:\n"
            + (exc.stderr or b"").decode(errors="replace")[-3000:]
        ) from exc
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}; stderr:\n"
        + proc.stderr.decode(errors="replace")[-3000:]
    )
    return proc.stdout


def produce(
    kcat: str, bootstrap: str, topic: str, lines: list[bytes], extra: list[str] | None = None
) -> None:
    """Produce one message per line with acks=all; `key<TAB>value` lines when -K is in extra."""
    args = ["-b", bootstrap, "-P", "-t", topic, "-X", "acks=all", "-X", "linger.ms=5"]
    run_kcat(kcat, args + (extra or []), stdin=b"\n".join(lines) + b"\n")


def consume_json(
    kcat: str, bootstrap: str, topic: str, extra: list[str], count: int | None = None
) -> list[dict[str, Any]]:
    """Consume with -J until the end of every partition (-e); one dict per message."""
    args = ["-b", bootstrap, "-C", "-t", topic, "-J", "-e", "-q"]
    if count is not None:
        args += ["-c", str(count)]
    out = run_kcat(kcat, args + extra)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def headers_of(msg: dict[str, Any]) -> list[tuple[str, str]]:
    flat = msg.get("headers") or []
    return list(zip(flat[::2], flat[1::2], strict=True))


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=15)


def test_metadata_listing(kcat: str, broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-md")
    create_topic(broker.bootstrap, topic, N_PARTITIONS)
    md = json.loads(run_kcat(kcat, ["-b", broker.bootstrap, "-L", "-J"]))
    assert [b["name"] for b in md["brokers"]] == [broker.bootstrap]
    listed = {t["topic"]: t for t in md["topics"]}
    assert topic in listed
    assert sorted(p["partition"] for p in listed[topic]["partitions"]) == list(range(N_PARTITIONS))


def test_auto_create_on_produce(kcat: str, broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-auto")
    produce(kcat, broker.bootstrap, topic, [b"first", b"second"])
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "beginning"])
    assert [m["payload"] for m in got] == ["first", "second"]


def test_keyed_produce_consume_1000(kcat: str, broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-keyed")
    create_topic(broker.bootstrap, topic, N_PARTITIONS)
    lines = [f"key-{i % 41}\tseq-{i:05d}-value".encode() for i in range(N_MESSAGES)]
    produce(kcat, broker.bootstrap, topic, lines, ["-K", "\t", "-H", "client=kcat", "-H", "empty="])
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "beginning"])
    assert len(got) == N_MESSAGES, f"consumed {len(got)} of {N_MESSAGES}"
    seqs = [int(m["payload"][4:9]) for m in got]
    assert sorted(seqs) == list(range(N_MESSAGES)), "lost or duplicated messages"
    per_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    key_partitions: dict[str, set[int]] = defaultdict(set)
    for m in got:
        seq = int(m["payload"][4:9])
        assert m["key"] == f"key-{seq % 41}"
        assert m["payload"] == f"seq-{seq:05d}-value"
        assert headers_of(m) == [("client", "kcat"), ("empty", "")]
        per_partition[m["partition"]].append(m)
        key_partitions[m["key"]].add(m["partition"])
    assert set(per_partition) == set(range(N_PARTITIONS))
    assert all(len(p) == 1 for p in key_partitions.values()), "a key landed on several partitions"
    for partition, msgs in per_partition.items():
        assert [m["offset"] for m in msgs] == list(range(len(msgs))), f"partition {partition}"
        part_seqs = [int(m["payload"][4:9]) for m in msgs]
        assert part_seqs == sorted(part_seqs), f"partition {partition}: produce order not kept"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(kcat: str, broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"kcat-codec-{codec}")
    create_topic(broker.bootstrap, topic, 1)
    lines = [f"k{i % 7}\t{codec}-compressible-value-{i:04d}-".encode() * 3 for i in range(300)]
    produce(kcat, broker.bootstrap, topic, lines, ["-K", "\t", "-z", codec, "-X", "linger.ms=50"])
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "beginning"])
    assert [(m["key"], m["payload"]) for m in got] == [
        tuple(line.decode().split("\t", 1)) for line in lines
    ]
    assert [m["offset"] for m in got] == list(range(len(lines)))
    codecs = stored_codecs(broker, topic)
    assert codecs, "no batches stored"
    assert set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}: not {codec}-compressed"


def test_seek_offset_timestamp_end(kcat: str, broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-seek")
    create_topic(broker.bootstrap, topic, 1)
    produce(kcat, broker.bootstrap, topic, [f"v{i}".encode() for i in range(50)])
    mid_ts = int(time.time() * 1000) + 1
    time.sleep(0.05)
    produce(kcat, broker.bootstrap, topic, [f"v{i}".encode() for i in range(50, 100)])

    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "42"])
    assert [m["offset"] for m in got] == list(range(42, 100))
    assert got[0]["payload"] == "v42"

    # Relative to the end: the last 10 messages only.
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "-10"])
    assert [m["payload"] for m in got] == [f"v{i}" for i in range(90, 100)]
    # At the end: nothing, and kcat exits cleanly at EOF.
    assert consume_json(kcat, broker.bootstrap, topic, ["-o", "end"]) == []

    # By timestamp: ListOffsets answers the first offset at or after it.
    out = run_kcat(kcat, ["-b", broker.bootstrap, "-Q", "-t", f"{topic}:0:{mid_ts}", "-J"])
    answer = json.loads(out)
    assert answer[topic]["0"]["offset"] == 50, answer
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", f"s@{mid_ts}"])
    assert got[0]["payload"] == "v50"
    assert len(got) == 50


def test_large_message_900k(kcat: str, broker: BrokerProcess, tmp_path: Path) -> None:
    topic = unique_topic("kcat-large")
    create_topic(broker.bootstrap, topic, 1)
    value = os.urandom(450 * 1024).hex().encode()  # 900 KiB of text: safe in kcat's JSON output
    path = tmp_path / "big.txt"
    path.write_bytes(value)
    # A file argument is produced as a single message.
    run_kcat(kcat, ["-b", broker.bootstrap, "-P", "-t", topic, "-X", "acks=all", str(path)])
    out = run_kcat(
        kcat,
        ["-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%S %s"],
    )
    size, _, payload = out.partition(b" ")
    assert int(size) == len(value)
    assert payload == value


def test_null_key_and_empty_value(kcat: str, broker: BrokerProcess) -> None:
    topic = unique_topic("kcat-null")
    create_topic(broker.bootstrap, topic, 1)
    # Without -K every key is NULL; -Z turns an empty line into a NULL value.
    produce(kcat, broker.bootstrap, topic, [b"null-key-value"])
    produce(kcat, broker.bootstrap, topic, [b"k\t"], ["-K", "\t"])
    produce(kcat, broker.bootstrap, topic, [b"k2\t"], ["-K", "\t", "-Z"])
    got = consume_json(kcat, broker.bootstrap, topic, ["-o", "beginning", "-Z"])
    assert [(m["key"], m["payload"]) for m in got] == [
        (None, "null-key-value"),
        ("k", ""),
        ("k2", None),
    ]
