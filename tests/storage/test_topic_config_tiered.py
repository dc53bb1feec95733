"""Kafka's tiered-storage topic config rules (KIP-405, KIP-950) in validate_topic_configs."""

from __future__ import annotations

import pytest

from kafkapy.storage import InvalidLogConfigError
from kafkapy.storage.config import LogConfig, validate_topic_configs

ON = {"remote.storage.enable": "true"}
DISABLED_IN_BROKER = "Tiered Storage functionality is disabled in the broker"


def _problem(configs: dict[str, str], *, system: bool = True, existing: dict[str, str] | None = None,
             defaults: LogConfig | None = None) -> str | None:
    try:
        validate_topic_configs(configs, defaults, existing=existing,
                               remote_storage_system_enabled=system)
    except InvalidLogConfigError as exc:
        return str(exc)
    return None


def test_remote_storage_is_refused_when_the_broker_has_it_off() -> None:
    assert _problem(ON, system=False) == (
        "Tiered Storage functionality is disabled in the broker. "
        "Topic cannot be configured with remote log storage.")
    assert _problem({"remote.storage.enable": "TRUE"}, system=False) is not None
    assert _problem(ON, system=True) is None
    assert _problem({"remote.storage.enable": "false"}, system=False) is None
    assert _problem({}, system=False) is None


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete,compact"])
def test_remote_storage_is_refused_on_a_compacted_topic(policy: str) -> None:
    problem = _problem({**ON, "cleanup.policy": policy})
    assert problem is not None
    assert "cleanup.policy=delete" in problem
    compacted_by_default = LogConfig(cleanup_policy="compact")
    assert _problem(ON, defaults=compacted_by_default) is not None


@pytest.mark.parametrize(("configs", "message"), [
    ({"retention.ms": "1000", "local.retention.ms": "-1"},
     "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 1000."),
    ({"retention.ms": "1000", "local.retention.ms": "1001"},
     "Invalid value 1001 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"),
    ({"retention.bytes": "100", "local.retention.bytes": "-1"},
     "Invalid value -1 for configuration local.retention.bytes: Value must not be -1 as retention.bytes value is set as 100."),
    ({"retention.bytes": "100", "local.retention.bytes": "200"},
     "Invalid value 200 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 100"),
])
def test_local_retention_must_fit_within_retention(configs: dict[str, str], message: str) -> None:
    assert _problem({**ON, **configs}) == message


@pytest.mark.parametrize("configs", [
    {"retention.ms": "1000", "local.retention.ms": "-2"},  # -2: the same as retention.ms
    {"retention.ms": "1000", "local.retention.ms": "1000"},
    {"retention.ms": "-1", "local.retention.ms": "-1"},  # unlimited both
    {"retention.ms": "-1", "local.retention.ms": "5000"},
    {"retention.bytes": "100", "local.retention.bytes": "50"},
    {"retention.bytes": "-1", "local.retention.bytes": "1000000"},
])
def test_valid_local_retention(configs: dict[str, str]) -> None:
    assert _problem({**ON, **configs}) is None


def test_local_retention_is_only_checked_on_tiered_topics() -> None:
    assert _problem({"retention.ms": "1000", "local.retention.ms": "5000"}, system=False) is None


def test_copy_disabled_needs_local_and_total_retention_equal() -> None:
    read_only = {**ON, "remote.log.copy.disable": "true"}
    assert _problem(read_only) is None
    assert _problem({**read_only, "retention.ms": "1000", "local.retention.ms": "1000"}) is None
    problem = _problem({**read_only, "retention.ms": "1000", "local.retention.ms": "500"})
    assert problem is not None
    assert problem.startswith("When `remote.log.copy.disable` is set to true, the `local.retention.ms`")
    problem = _problem({**read_only, "retention.bytes": "100", "local.retention.bytes": "50"})
    assert problem is not None
    assert "`local.retention.bytes`" in problem


def test_turning_remote_storage_off_needs_delete_on_disable() -> None:
    problem = _problem({"remote.storage.enable": "false"}, existing=ON)
    assert problem is not None
    assert problem.startswith("It is invalid to disable remote storage without deleting remote data.")
    assert _problem({}, existing=ON) is not None  # removing the override turns it off too
    off_and_delete = {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    assert _problem(off_and_delete, existing=ON) is None
    assert _problem({"remote.storage.enable": "false"}, existing={}) is None
