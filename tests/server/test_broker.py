"""The Broker's domain operations and what survives a restart (clean or not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.broker import Broker, BrokerError
from kafkapy.server.config import BrokerConfig
from kafkapy.server.metadata_store import TOPICS_FILE_NAME, MetaProperties, topic_name_error
from kafkapy.storage.errors import StorageError


def open_broker(path: Path, **extra: str) -> Broker:
    return Broker(BrokerConfig({"log.dirs": str(path), "offsets.topic.num.partitions": "1", **extra}))


def test_topics_configs_and_ids_persist(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    info = b.create_topic("orders", 3, {"cleanup.policy": "compact"})
    b.close()
    again = open_broker(tmp_path)
    got = again.topics.get("orders")
    assert got is not None
    assert (got.topic_id, got.partitions, got.configs) == (info.topic_id, 3, {"cleanup.policy": "compact"})
    assert again.topics.by_id(info.topic_id) is got
    assert again.cluster_id == b.cluster_id
    assert again.partition_log("orders", 0) is not None
    assert again.partition_log("orders", 0).config.cleanup_policy == "compact"  # type: ignore[union-attr]
    again.close()


CRASH_SCRIPT = """
import os, sys
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig
b = Broker(BrokerConfig({"log.dirs": sys.argv[1], "offsets.topic.num.partitions": "1"}))
b.create_topic("t", 1)
plog = b.partition_log("t", 0)
plog.append(build_batch([Record(0, 0, None, b"a", []), Record(1, 0, None, b"b", [])], base_timestamp=1), now_ms=1)
b.after_append("t", 0, plog)
os._exit(0)  # a crash: no flush, no checkpoint, no clean-shutdown marker
"""


def test_unclean_restart_exposes_every_recovered_message(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)], check=True, timeout=60)
    again = open_broker(tmp_path)
    reopened = again.partition_log("t", 0)
    assert reopened is not None
    assert (reopened.log_end_offset, reopened.high_watermark) == (2, 2)
    again.close()


def test_deleted_topic_leftovers_are_removed_at_start(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    b.create_topic("gone", 2)
    b.close()
    # simulate a crash after the topic table was rewritten but before the logs were removed
    doc = json.loads((tmp_path / TOPICS_FILE_NAME).read_text())
    doc["topics"] = [t for t in doc["topics"] if t["name"] != "gone"]
    (tmp_path / TOPICS_FILE_NAME).write_text(json.dumps(doc))
    again = open_broker(tmp_path)
    assert "gone" not in again.topics
    assert not (tmp_path / "gone-0").exists()
    again.close()


def test_data_dir_without_topic_table_is_adopted(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    created = b.create_topic("old", 2, {"retention.ms": "5"})
    b.close()
    (tmp_path / TOPICS_FILE_NAME).unlink()
    again = open_broker(tmp_path)
    info = again.topics.get("old")
    assert info is not None
    assert (info.partitions, info.topic_id, info.configs) == (2, created.topic_id, {"retention.ms": "5"})
    again.close()


def test_node_id_mismatch_is_refused(tmp_path: Path) -> None:
    MetaProperties.load_or_create(tmp_path, 1)
    with pytest.raises(ValueError, match=r"node\.id=1"):
        MetaProperties.load_or_create(tmp_path, 2)


def test_topic_errors(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    b.create_topic("a.b", 1)
    cases = [
        (lambda: b.create_topic("a.b"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (lambda: b.create_topic("a_b"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (lambda: b.create_topic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (lambda: b.create_topic("x", 0), ErrorCode.INVALID_PARTITIONS),
        (lambda: b.create_topic("y", 1, {"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (lambda: b.create_topic("z", 1, {"no.such": "1"}), ErrorCode.INVALID_CONFIG),
        (lambda: b.delete_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (lambda: b.create_partitions("a.b", 1), ErrorCode.INVALID_PARTITIONS),
        (lambda: b.delete_topic(b.ensure_internal_topic("__transaction_state", 1).name), ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    for call, code in cases:
        with pytest.raises(BrokerError) as err:
            call()
        assert err.value.error_code == code
    b.close()


def test_live_config_update_reaches_the_log(tmp_path: Path) -> None:
    b = open_broker(tmp_path)
    b.create_topic("t", 2)
    b.set_topic_configs("t", {"retention.ms": "1000", "max.message.bytes": "100", "message.timestamp.type": "LogAppendTime"})
    for p in (0, 1):
        plog = b.partition_log("t", p)
        assert plog is not None
        assert (plog.config.retention_ms, plog.config.max_message_bytes, plog.config.log_append_time) == (1000, 100, True)
    b.close()


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_topic_name_rules(name: str) -> None:
    legal = (
        0 < len(name) <= 249
        and name not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    )
    assert (topic_name_error(name) is None) == legal


def test_a_data_dir_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    first = open_broker(tmp_path)
    with pytest.raises((ValueError, StorageError), match="in use"):
        open_broker(tmp_path)
    first.close()
    open_broker(tmp_path).close()
