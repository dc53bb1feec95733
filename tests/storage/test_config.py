"""LogConfig: Kafka topic-config names in, validated values out, round trip for describe."""

from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage import InvalidLogConfigError, LogConfig


def test_from_topic_configs_maps_kafka_names() -> None:
    cfg = LogConfig.from_topic_configs({
        "segment.bytes": "2048", "retention.ms": "-1", "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25",
        "min.insync.replicas": "2",
    })
    assert cfg.segment_bytes == 2048
    assert cfg.retention_ms == -1
    assert cfg.compact
    assert cfg.delete
    assert cfg.log_append_time
    assert cfg.min_cleanable_dirty_ratio == 0.25
    assert cfg.extra == {"min.insync.replicas": "2"}
    assert LogConfig.from_topic_configs(cfg.to_topic_configs()) == cfg
    assert len({cfg, LogConfig.from_topic_configs(cfg.to_topic_configs())}) == 1  # hashable
    assert cfg.overrides(LogConfig()) == {
        "segment.bytes": "2048", "retention.ms": "-1", "cleanup.policy": "compact,delete",
        "message.timestamp.type": "LogAppendTime", "min.cleanable.dirty.ratio": "0.25",
        "min.insync.replicas": "2",
    }


def test_defaults_overlay() -> None:
    defaults = LogConfig(retention_ms=5)
    assert LogConfig.from_topic_configs({}, defaults) == defaults
    assert LogConfig.from_topic_configs({"segment.ms": "7"}, defaults).retention_ms == 5


@pytest.mark.parametrize("configs", [
    {"no.such.config": "1"},
    {"segment.bytes": "big"},
    {"segment.bytes": "10"},
    {"cleanup.policy": "shred"},
    {"message.timestamp.type": "Whenever"},
    {"min.cleanable.dirty.ratio": "1.5"},
    {"flush.messages": "0"},
])
def test_bad_configs_are_invalid_config(configs: dict[str, str]) -> None:
    with pytest.raises(InvalidLogConfigError) as info:
        LogConfig.from_topic_configs(configs)
    assert info.value.error_code == ErrorCode.INVALID_CONFIG
