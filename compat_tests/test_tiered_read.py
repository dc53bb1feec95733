"""confluent-kafka and kafka-python consumers read a tiered partition from offset 0 (KIP-405).

The broker (`compat_tests/tiered_broker.py`, a subprocess) keeps most of the partition in a
real S3 server (SeaweedFS; KAFKAPY_TEST_S3=moto) and only the tail on disk; an aborted
transaction lies in the remote range. Each consumer, read_committed and assigned from offset 0,
must see every committed record in order, byte-exact, and none of the aborted ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTopicPartition

from compat_tests.conftest import BrokerFactory
from kafkapy.testing.object_store import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TOPIC = "tiered"
READ_TIMEOUT_S = 60.0
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiered_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The broker subprocess and what it wrote: port, local log start, committed records."""
    tmp = tmp_path_factory.mktemp("tiered")
    with S3Server(os.environ.get("KAFKAPY_TEST_S3", "seaweedfs")) as s3:  # type: ignore[arg-type]
        out = tmp / "state.json"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with (tmp / "broker.log").open("wb") as broker_log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "compat_tests.tiered_broker", "--data-dir", str(tmp / "data"),
                 "--endpoint", s3.endpoint_url, "--bucket", s3.bucket, "--prefix", f"c-{uuid.uuid4().hex[:8]}",
                 "--credentials", str(s3.credentials_file), "--out", str(out)],
                cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=broker_log)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.strip() == b"READY", (tmp / "broker.log").read_text()[-3000:]
            state = json.loads(out.read_text())
            state["committed"] = [(o, bytes.fromhex(v)) for o, v in state["committed"]]
            yield state
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_the_remote_range_holds_the_aborted_transaction(tiered_broker: dict[str, Any]) -> None:
    committed = tiered_broker["committed"]
    offsets = [o for o, _ in committed]
    gap = next(i for i in range(1, len(offsets)) if offsets[i] != offsets[i - 1] + 1)
    assert offsets[gap] < tiered_broker["local_start"]  # the aborted records are remote
    assert tiered_broker["local_start"] > len(committed) // 2  # most of the log is remote


def test_confluent_kafka_reads_from_offset_0_read_committed(tiered_broker: dict[str, Any]) -> None:
    consumer = Consumer({
        "bootstrap.servers": f"127.0.0.1:{tiered_broker['port']}", "group.id": f"g-{uuid.uuid4().hex[:6]}",
        "isolation.level": "read_committed", "enable.auto.commit": False, "auto.offset.reset": "error",
    })
    try:
        consumer.assign([CkTopicPartition(TOPIC, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < len(tiered_broker["committed"]) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.value()))
        assert got == tiered_broker["committed"]
    finally:
        consumer.close()


def test_kafka_python_reads_from_offset_0_read_committed(tiered_broker: dict[str, Any]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{tiered_broker['port']}", group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="none", request_timeout_ms=30000)
    try:
        tp = KpTopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < len(tiered_broker["committed"]) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend((r.offset, r.value) for r in records)
        assert got == tiered_broker["committed"]
    finally:
        consumer.close()


def test_consumers_read_what_the_leader_tiered(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """End to end through `kafkapy serve`: the leader copies rolled segments and drops local
    ones past `local.retention.bytes`; consumers then read everything from offset 0."""
    with S3Server(os.environ.get("KAFKAPY_TEST_S3", "seaweedfs")) as s3:  # type: ignore[arg-type]
        overrides = {
            "remote.log.storage.system.enable": "true", "log.retention.check.interval.ms": "500",
            "remote.log.manager.task.interval.ms": "500",
            "rsm.config.storage.s3.bucket.name": s3.bucket, "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        }
        data_dir = tmp_path / "data"
        broker = broker_factory.start(data_dir=data_dir, extra_args=[
            arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics([NewTopic(TOPIC, 1, 1, config={
            "remote.storage.enable": "true", "segment.bytes": str(1 << 20),
            "local.retention.bytes": str(1 << 20), "retention.ms": "-1"})])
        created[TOPIC].result(timeout=30)
        committed = _produce_with_an_aborted_transaction(broker.bootstrap)
        deadline = time.monotonic() + 60
        while len(list((data_dir / f"{TOPIC}-0").glob("*.log"))) > 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(list((data_dir / f"{TOPIC}-0").glob("*.log"))) <= 3, "local segments were not tiered"
        state = {"port": broker.port, "committed": committed}
        test_confluent_kafka_reads_from_offset_0_read_committed(state)
        test_kafka_python_reads_from_offset_0_read_committed(state)


def _produce_with_an_aborted_transaction(bootstrap: str) -> list[tuple[int, bytes]]:
    """An aborted transaction, then about 6 MB of plain records: (offset, value) of those."""
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(TOPIC, b"aborted", partition=0)
    txn.flush(30)
    txn.abort_transaction(30)
    committed: list[tuple[int, bytes]] = []

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        committed.append((msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(6000):
        producer.produce(TOPIC, f"{i:06d}".encode().ljust(1000, b"x"), partition=0, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return sorted(committed)
