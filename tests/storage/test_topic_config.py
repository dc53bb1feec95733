"""The topic-config table: tied to LogConfig's fields, its defaults and checks, and to Kafka's docs."""

from __future__ import annotations

import dataclasses
import re

import pytest

from kafkapy.protocol.config_types import ConfigType
from kafkapy.storage import InvalidLogConfigError, LogConfig
from kafkapy.storage.config import validate_topic_configs
from kafkapy.storage.topic_config import TOPIC_CONFIGS, topic_config_problem
from tests.kafka_reference import kafka_reference

_LOG_FIELDS = {
    f.name.replace("_", "."): f for f in dataclasses.fields(LogConfig) if f.name != "extra"
}
_PY_TYPES = {
    "int": {ConfigType.INT, ConfigType.SHORT, ConfigType.LONG},
    "float": {ConfigType.DOUBLE},
    "str": {ConfigType.STRING, ConfigType.LIST},
}


def test_every_log_config_field_is_a_table_key_marked_as_a_log_setting() -> None:
    for name in _LOG_FIELDS:
        assert name in TOPIC_CONFIGS, f"LogConfig field {name} has no topic config"
        assert TOPIC_CONFIGS[name].log_setting, f"{name} is a LogConfig field"


def test_every_table_key_is_a_log_config_field_or_explicitly_not_a_log_setting() -> None:
    for name, key in TOPIC_CONFIGS.items():
        assert key.log_setting == (name in _LOG_FIELDS), name
        if not key.log_setting:
            # kept verbatim for describe, never dropped and never refused
            assert LogConfig.from_topic_configs({name: key.default}).extra[name] == key.default


def test_log_settings_have_the_type_and_default_of_their_log_config_field() -> None:
    defaults = LogConfig().to_topic_configs()
    for name, field in _LOG_FIELDS.items():
        key = TOPIC_CONFIGS[name]
        assert key.type in _PY_TYPES[str(field.type)], (name, field.type, key.type)
        assert defaults[name] == key.default, name


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_every_default_is_valid(name: str) -> None:
    key = TOPIC_CONFIGS[name]
    assert topic_config_problem(name, key.default) is None
    validate_topic_configs({name: key.default})


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_a_value_of_the_wrong_type_or_outside_the_range_is_refused(name: str) -> None:
    key = TOPIC_CONFIGS[name]
    bad = ["not-a-number"] if key.type in _PY_TYPES["int"] | _PY_TYPES["float"] else []
    if key.type == ConfigType.BOOLEAN:
        bad.append("yes")
    if key.at_least is not None:
        bad.append(str(int(key.at_least) - 1) if key.type != ConfigType.DOUBLE else "-0.1")
    if key.at_most is not None:
        bad.append(str(int(key.at_most) + 1) if key.type != ConfigType.DOUBLE else "1.1")
    if key.choices:
        bad.append("nonsense")
    if key.check is not None:
        bad.append("x:y")
    for value in bad:
        assert topic_config_problem(name, value) is not None, (name, value)
        with pytest.raises(InvalidLogConfigError):
            validate_topic_configs({name: value})
    if key.at_least is not None and key.type != ConfigType.DOUBLE:
        assert topic_config_problem(name, str(int(key.at_least))) is None


def test_unknown_and_null_values_are_refused() -> None:
    assert topic_config_problem("no.such.config", "1") is not None
    assert topic_config_problem("retention.ms", None) is not None
    with pytest.raises(InvalidLogConfigError):
        validate_topic_configs({"no.such.config": "1"})


def test_list_configs_take_every_element_and_the_empty_list() -> None:
    assert topic_config_problem("cleanup.policy", "compact,delete") is None
    assert topic_config_problem("cleanup.policy", "") is None  # what a SUBTRACT of all leaves
    assert topic_config_problem("cleanup.policy", "compact,shred") is not None
    assert topic_config_problem("leader.replication.throttled.replicas", "0:1,1:2") is None
    assert topic_config_problem("leader.replication.throttled.replicas", "*") is None
    assert topic_config_problem("leader.replication.throttled.replicas", "*,0:1") is not None


def test_preallocate_is_a_known_topic_config() -> None:
    # the broker refused it while the controller accepted it; both read this table now
    assert validate_topic_configs({"preallocate": "true"}).extra["preallocate"] == "true"
    assert topic_config_problem("preallocate", "sometimes") is not None


def _design_doc() -> str:
    return kafka_reference("docs", "design.html").read_text()


def test_topic_configs_kafkas_design_doc_names_are_in_the_table() -> None:
    text = _design_doc()
    named = set(re.findall(r"topic's <code>([a-z.]+)</code>", text))
    assert named >= {"min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms"}
    assert named <= set(TOPIC_CONFIGS), named - set(TOPIC_CONFIGS)


def test_broker_defaults_named_in_kafkas_design_doc_are_synonyms_in_the_table() -> None:
    # "log.cleanup.policy ... affects all of the topics ... that do not have a configuration
    # override": every log.* key the doc names is the broker default of some topic config
    broker_keys = set(re.findall(r"<code>(log\.[a-z.]+)</code>", _design_doc()))
    assert broker_keys >= {"log.cleanup.policy", "log.cleaner.min.compaction.lag.ms"}
    synonyms = {s for key in TOPIC_CONFIGS.values() for s in key.broker_synonyms}
    assert broker_keys <= synonyms, broker_keys - synonyms
