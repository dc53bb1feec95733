"""`kafkapy dump-log` on files written by a real broker for real clients, and on damaged files."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import READY, kafkapy

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PAD = "x" * 300  # compressible: librdkafka sends a batch uncompressed when that is smaller


@dataclass
class DataDir:
    path: Path
    bootstrap: str


def _serve(data: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--data-dir", str(data), "--listeners",
         "PLAINTEXT://127.0.0.1:0", "--log-level", "WARNING",
         "--override", "group.initial.rebalance.delay.ms=0", "--override", "offsets.topic.num.partitions=1",
         "--override", "transaction.state.log.num.partitions=1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = READY.search(line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, f"{m.group(1)}:{m.group(2)}"
    proc.wait(10)
    raise AssertionError("no ready line")


def _aborted_transaction(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "dump-abort"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, value=b"never", key=b"k")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"kept", key=b"k")
    p.commit_transaction(30)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> DataDir:
    """A data dir a broker wrote for librdkafka: every codec, transactions, a group; then stopped."""
    data = tmp_path_factory.mktemp("dump") / "data"
    proc, bootstrap = _serve(data)
    try:
        for codec in CODECS:
            topic = f"d-{codec}"
            # small segments and an index entry per batch: sealed segments with indexes
            assert kafkapy("topics", "create", topic, "--config", "segment.bytes=200",
                           "--config", "index.interval.bytes=1", bootstrap=bootstrap).code == 0
            for i in range(4):
                stdin = "".join(f'{{"key": "k{i}-{j}", "value": "{codec}-{i}-{j}{PAD}", "headers": [["h", "{j}"]]}}\n'
                                for j in range(3))
                r = kafkapy("produce", topic, "--format", "json", "--compression", codec, "--idempotent",
                            stdin=stdin, bootstrap=bootstrap)
                assert r.code == 0, r.stderr
        # several batches per segment and an index entry after each: indexes with entries
        assert kafkapy("topics", "create", "d-idx", "--config", "segment.bytes=2500",
                       "--config", "index.interval.bytes=1", bootstrap=bootstrap).code == 0
        for i in range(6):
            assert kafkapy("produce", "d-idx", stdin=f"{i}{PAD}\n{i}{PAD}\n", bootstrap=bootstrap).code == 0
        assert kafkapy("topics", "create", "d-txn", bootstrap=bootstrap).code == 0
        assert kafkapy("produce", "d-txn", "--transactional-id", "dump-commit", stdin="t1\nt2\n",
                       bootstrap=bootstrap).code == 0
        _aborted_transaction(bootstrap, "d-txn")
        assert kafkapy("consume", "d-txn", "--group", "dump-g", "--from-beginning", "--exit-at-end",
                       "--isolation-level", "read_committed", bootstrap=bootstrap).code == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    return DataDir(data, bootstrap)


def dump(*args: str | Path) -> tuple[int, list[dict], str]:
    r = kafkapy("dump-log", *map(str, args), "--json")
    assert "Traceback" not in r.stderr, r.stderr
    return r.code, r.json(), r.stderr


@pytest.mark.parametrize("codec", CODECS)
def test_segments_of_every_codec(written: DataDir, codec: str) -> None:
    part = written.path / f"d-{codec}-0"
    segments = sorted(part.glob("*.log"))
    assert len(segments) > 1  # segment.bytes=200 rolled them
    code, docs, _ = dump(*segments, "--print-data-log")
    assert code == 0
    batches = [b for d in docs for b in d["batches"]]
    assert {b["compression"] for b in batches} == {codec}
    assert all(b["is_valid"] and b["producer_id"] >= 0 and b["base_sequence"] >= 0 for b in batches)
    records = [r for b in batches for r in b["records"]]
    assert [r["offset"] for r in records] == list(range(12))
    assert [(r["key"], r["value"]) for r in records] == [
        (f"k{i}-{j}", f"{codec}-{i}-{j}{PAD}") for i in range(4) for j in range(3)]
    assert records[4]["headers"] == [["h", "1"]]
    assert [r["sequence"] for r in records] == [0, 1, 2] * 4  # one idempotent producer per run
    human = kafkapy("dump-log", str(segments[0]), "-d").stdout
    assert f"compresscodec: {codec} " in human
    # kafka-dump-log.sh's spelling prints the same
    assert kafkapy("dump-log", "--files", ",".join(map(str, segments[:2])), "--deep-iteration").stdout == (
        kafkapy("dump-log", *map(str, segments[:2]), "-d").stdout)
    assert re.search(r"\| offset: 0 CreateTime: \d+ keySize: 4 valueSize: \d+ sequence: 0 headerKeys: \[h\] "
                     rf"key: k0-0 payload: {codec}-0-0x", human)


def test_indexes_and_producer_snapshots_are_sane(written: DataDir) -> None:
    part = written.path / "d-idx-0"
    indexes = sorted(part.glob("*.index")) + sorted(part.glob("*.timeindex"))
    assert indexes, sorted(p.name for p in part.iterdir())
    code, docs, _ = dump(*indexes)
    assert code == 0
    assert all(d["damage"] == [] and d["checked_against"] for d in docs)
    offset_entries = [e for d in docs if d["kind"] == "offset-index" for e in d["entries"]]
    assert offset_entries
    assert any(d["kind"] == "time-index" and d["entries"] for d in docs)
    snapshots = sorted((written.path / "d-lz4-0").glob("*.snapshot"))
    assert snapshots
    code, docs, _ = dump(snapshots[-1])
    assert code == 0
    assert docs[0]["snapshot"]["entries"], docs[0]


def test_transaction_markers_and_aborted_index(written: DataDir) -> None:
    part = written.path / "d-txn-0"
    code, docs, _ = dump(*sorted(part.glob("*.log")), "-d")
    assert code == 0
    records = [(b, r) for d in docs for b in d["batches"] for r in b["records"]]
    markers = [r["control"]["marker"] for b, r in records if b["is_control"]]
    assert markers == ["COMMIT", "ABORT", "COMMIT"]
    data = [r["value"] for b, r in records if not b["is_control"]]
    assert data == ["t1", "t2", "never", "kept"]
    assert all(b["is_transactional"] for b, _ in records)
    txn_indexes = sorted(part.glob("*.txnindex"))
    code, docs, _ = dump(*txn_indexes)
    aborted = [e for d in docs for e in d["entries"]]
    assert len(aborted) == 1
    assert aborted[0]["first_offset"] == 3  # "never", after t1, t2 and their marker
    human = kafkapy("dump-log", str(sorted(part.glob("*.log"))[0]), "-d").stdout
    assert "endTxnMarker: ABORT coordinatorEpoch:" in human


def test_internal_topic_decoders(written: DataDir) -> None:
    code, docs, _ = dump(*sorted((written.path / "__consumer_offsets-0").glob("*.log")), "-d")
    assert code == 0
    keys = [r["key"] for d in docs for b in d["batches"] for r in b["records"] if not b["is_control"]]
    assert {"type": "OffsetCommitKey", "group_id": "dump-g", "topic": "d-txn", "partition": 0} in keys
    code, docs, _ = dump(*sorted((written.path / "__transaction_state-0").glob("*.log")), "-d")
    assert code == 0
    values = [r["value"] for d in docs for b in d["batches"] for r in b["records"]]
    ids = {v.get("transactional_id") for v in values if isinstance(v, dict)}
    assert {"dump-commit", "dump-abort"} <= ids
    # forcing a decoder on a plain topic: undecodable records are shown raw, with the reason
    code, docs, _ = dump(*sorted((written.path / "d-none-0").glob("*.log"))[:1], "--offsets-decoder")
    assert code == 0
    first = docs[0]["batches"][0]["records"][0]
    assert "decode_error" in first
    assert first["value"] == f"none-0-0{PAD}"


def test_forced_transaction_log_decoder(written: DataDir, tmp_path: Path) -> None:
    """A copy outside its topic's directory is decoded only when the decoder is asked for."""
    copy = tmp_path / "copied" / "00000000000000000000.log"
    copy.parent.mkdir()
    copy.write_bytes(sorted((written.path / "__transaction_state-0").glob("*.log"))[0].read_bytes())
    code, docs, _ = dump(copy, "-d")
    assert code == 0
    raw = [r["value"] for b in docs[0]["batches"] for r in b["records"]]
    assert not any(isinstance(v, dict) and "transactional_id" in v for v in raw)
    code, docs, _ = dump(copy, "-d", "--transaction-log-decoder")
    assert code == 0
    decoded = [r["value"] for b in docs[0]["batches"] for r in b["records"]]
    assert {"dump-commit", "dump-abort"} <= {v.get("transactional_id") for v in decoded if isinstance(v, dict)}



def test_forced_cluster_metadata_decoder(tmp_path: Path) -> None:
    """A metadata log segment (records as the controller encodes them) outside its directory."""
    from kafkapy.controller.records import TopicRecord, encode_record
    from kafkapy.protocol.records import Record, build_batch

    topic = TopicRecord(name="meta-topic", topic_id=uuid.uuid4())
    segment = tmp_path / "copied" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(build_batch([Record(value=encode_record(topic))], base_timestamp=1, partition_leader_epoch=1))
    code, docs, _ = dump(segment, "-d")
    assert code == 0
    assert set(docs[0]["batches"][0]["records"][0]["value"]) == {"base64"}  # raw bytes
    code, docs, _ = dump(segment, "-d", "--cluster-metadata-decoder")
    assert code == 0
    (value,) = [r["value"] for b in docs[0]["batches"] for r in b["records"]]
    assert value["type"] == "TopicRecord"
    assert value["name"] == "meta-topic"
    assert value["topic_id"] == str(topic.topic_id)


def test_scram_credential_records_print_without_their_keys(tmp_path: Path) -> None:
    from kafkapy.controller.records import UserScramCredentialRecord, encode_record
    from kafkapy.protocol.records import Record, build_batch

    record = UserScramCredentialRecord("kim", 2, b"kims-salt", b"kims-stored-key", b"kims-server-key", 8192)
    segment = tmp_path / "copied" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(build_batch([Record(value=encode_record(record))], base_timestamp=1))
    code, docs, _ = dump(segment, "-d", "--cluster-metadata-decoder")
    assert code == 0
    (value,) = [r["value"] for b in docs[0]["batches"] for r in b["records"]]
    assert value == {"type": "UserScramCredentialRecord", "name": "kim", "mechanism": 2, "salt": "(redacted)",
                     "stored_key": "(redacted)", "server_key": "(redacted)", "iterations": 8192}  # fmt: skip
    printed = json.dumps(docs)
    assert "kims" not in printed.replace('"kim"', "")
    assert base64.b64encode(b"kims-salt").decode()[:8] not in printed


def test_checkpoints(written: DataDir) -> None:
    part = written.path / "d-none-0"
    code, docs, _ = dump(part / "offsets.checkpoint", part / "partition.metadata", part / "leader-epoch-checkpoint")
    assert code == 0
    by_kind = {Path(d["file"]).name: d for d in docs}
    assert by_kind["offsets.checkpoint"]["parsed"]["high_watermark"] == 12
    assert len(by_kind["partition.metadata"]["parsed"]["topic_id"]) == 36


def test_metadata_snapshot_written_by_the_controller_code(tmp_path: Path) -> None:
    from kafkapy.controller.image import MetadataImage
    from kafkapy.controller.records import TopicRecord
    from kafkapy.controller.snapshot import encode_snapshot

    image = MetadataImage()
    image.apply(TopicRecord(name="snap-topic", topic_id=uuid.uuid4()), 0)
    path = tmp_path / "__cluster_metadata-0" / "00000000000000000001-0000000003.checkpoint"
    path.parent.mkdir()
    path.write_bytes(encode_snapshot(image, end_offset=1, epoch=3, timestamp_ms=1))
    code, docs, _ = dump(path, "-d")
    assert code == 0
    assert docs[0]["header"]["end_offset"] == 1
    values = [r["value"] for b in docs[0]["batches"] for r in b["records"]]
    assert any(isinstance(v, dict) and v.get("type") == "TopicRecord" and v["name"] == "snap-topic" for v in values)
    path.write_bytes(path.read_bytes()[:-5])
    code, docs, _ = dump(path)
    assert code == 1
    assert docs[0]["damage"]


def test_damaged_files_are_reported_not_crashed_on(written: DataDir, tmp_path: Path) -> None:
    src = sorted((written.path / "d-gzip-0").glob("*.log"))[0]
    part = tmp_path / "d-gzip-0"
    part.mkdir()
    flipped = part / src.name
    shutil.copy(src, flipped)
    raw = bytearray(flipped.read_bytes())
    raw[80] ^= 0xFF  # inside the first batch's compressed records
    flipped.write_bytes(bytes(raw))
    code, docs, stderr = dump(flipped, "-d")
    assert code == 1
    assert any("CRC mismatch" in d for d in docs[0]["damage"])
    assert "is damaged" in stderr
    assert docs[0]["batches"][0]["is_valid"] is False
    several = sorted((written.path / "d-idx-0").glob("*.log"))[0]
    flipped = tmp_path / "d-idx-0" / several.name
    flipped.parent.mkdir()
    raw = bytearray(several.read_bytes())
    raw[100] ^= 0xFF  # a value byte of the first batch
    flipped.write_bytes(bytes(raw))
    code, docs, _ = dump(flipped, "-d")
    assert code == 1
    valid = [b["is_valid"] for b in docs[0]["batches"]]
    assert valid[0] is False
    assert len(valid) >= 2
    assert all(valid[1:])  # the batches after the damaged one are still read

    cut = part / "00000000000000000099.log"
    cut.write_bytes(src.read_bytes()[:-10])
    code, docs, _ = dump(cut)
    assert code == 1
    assert any("truncated" in d for d in docs[0]["damage"])
    human = kafkapy("dump-log", str(cut))
    assert human.code == 1
    assert "DAMAGE: at position" in human.stdout
    assert "Traceback" not in human.stderr

    index = part / "00000000000000000000.index"
    index.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x07\x00\x00\x00")  # no batch at 7, a partial entry
    shutil.copy(src, part / "00000000000000000000.log")
    code, docs, _ = dump(index)
    assert code == 1
    assert any("trailing bytes" in d for d in docs[0]["damage"])
    assert any("no batch starts there" in d for d in docs[0]["damage"])

    garbage = part / "00000000000000000003.snapshot"
    garbage.write_bytes(os.urandom(40))
    code, docs, _ = dump(garbage)
    assert code == 1
    assert docs[0]["damage"]

    r = kafkapy("dump-log", str(part / "nonexistent.log"))
    assert r.code == 2


def test_files_on_their_way_in_or_out(written: DataDir, tmp_path: Path) -> None:
    """A clean's `.cleaned` output and Kafka's `.deleted` files are read like the originals."""
    part = written.path / "d-idx-0"
    log = sorted(part.glob("*.log"))[0]
    index = part / f"{log.stem}.index"
    shutil.copy(log, tmp_path / f"{log.name}.cleaned")
    shutil.copy(index, tmp_path / f"{index.name}.deleted")
    code, docs, _ = dump(tmp_path / f"{log.name}.cleaned", tmp_path / f"{index.name}.deleted")
    assert code == 0
    assert docs[0]["kind"] == "segment"
    assert docs[0]["batches"]
    assert docs[1]["kind"] == "offset-index"


def test_files_are_required_and_must_exist(tmp_path: Path) -> None:
    r = kafkapy("dump-log")
    assert r.code == 2
    assert "name the files" in r.stderr
    r = kafkapy("dump-log", "--files", f"{tmp_path / 'missing.log'}")
    assert r.code == 2
    assert "missing.log is not a file" in r.stderr
