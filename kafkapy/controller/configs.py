"""Config changes (Kafka's ConfigurationControlManager): IncrementalAlterConfigs as records.

Rules:
- TOPIC resources: the topic must exist (UNKNOWN_TOPIC_OR_PARTITION); SET / DELETE any topic
  config, APPEND / SUBTRACT only list configs; the resulting override set must be a valid topic
  config (INVALID_CONFIG); a name twice in one resource is INVALID_REQUEST.
- BROKER resources ("" = cluster default, else a registered broker id): the dynamic configs
  the controller acts on (`DYNAMIC_BROKER_CONFIGS`) and those `ControllerConfig.
  broker_config_check` accepts (the brokers' own dynamic configs, which they apply from the
  image); others, and values the check refuses, are INVALID_REQUEST - Kafka's code for a broker
  config its DynamicBrokerConfig cannot validate (KAFKA-13609 keeps it so). APPEND / SUBTRACT
  on the list-typed ones named by `ControllerConfig.broker_list_configs` (on another name:
  INVALID_CONFIG, as Kafka's prepareIncrementalConfigs answers). Those Kafka takes per
  broker only (`ControllerConfig.broker_only_configs`) set on the cluster default "" are
  INVALID_REQUEST too.
- GROUP resources (KIP-848 group configs, a group id that need not exist): SET / DELETE; the
  resulting override set must pass `ControllerConfig.group_config_check` (INVALID_CONFIG;
  INVALID_REQUEST without a check or for an empty group id).
- Every changed name is one ConfigRecord (value None = removed); unchanged values write nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from kafkapy.controller.records import ConfigRecord, ConfigResourceType, MetadataRecord
from kafkapy.controller.state import ControllerResult, ControllerState
from kafkapy.protocol.config_types import ConfigType
from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.config import validate_topic_configs
from kafkapy.storage.errors import InvalidLogConfigError
from kafkapy.storage.topic_config import TOPIC_CONFIGS

__all__ = [
    "DYNAMIC_BROKER_CONFIGS",
    "ConfigChange",
    "ConfigOp",
    "ConfigResult",
    "incremental_alter_configs",
]

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TOPIC_LISTS = {n: k.default for n, k in TOPIC_CONFIGS.items() if k.type == ConfigType.LIST}
_BOOL = frozenset({"true", "false"})
DYNAMIC_BROKER_CONFIGS = frozenset({"unclean.leader.election.enable", "min.insync.replicas"})


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigOp:
    name: str
    op: int
    value: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigChange:
    resource_type: int
    resource_name: str
    ops: Sequence[ConfigOp]


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigResult:
    resource_type: int
    resource_name: str
    error: ErrorCode
    message: str | None = None


class _Reject(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _apply_ops(
    current: Mapping[str, str], ops: Sequence[ConfigOp], lists: Mapping[str, str]
) -> dict[str, str]:
    """SET / DELETE / APPEND / SUBTRACT on one resource's overrides; `lists` names the
    list-typed configs with the default an APPEND / SUBTRACT starts from when there is no
    override (Kafka's ConfigDef default)."""
    names = [o.name for o in ops]
    if len(set(names)) != len(names):
        raise _Reject(ErrorCode.INVALID_REQUEST, "duplicate config name")
    new = dict(current)
    for o in ops:
        if o.op == SET:
            if o.value is None:
                raise _Reject(ErrorCode.INVALID_REQUEST, f"no value to set for {o.name}")
            new[o.name] = o.value
        elif o.op == DELETE:
            new.pop(o.name, None)
        elif o.op in (APPEND, SUBTRACT):
            if o.name not in lists:
                raise _Reject(ErrorCode.INVALID_CONFIG, f"{o.name} is not a list config")
            base = new.get(o.name, lists[o.name])
            items = [v.strip() for v in base.split(",") if v.strip()]
            given = [v.strip() for v in (o.value or "").split(",") if v.strip()]
            if o.op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[o.name] = ",".join(items)
        else:
            raise _Reject(ErrorCode.INVALID_REQUEST, f"unknown config operation {o.op}")
    return new


def _topic_configs(
    st: ControllerState, change: ConfigChange
) -> tuple[dict[str, str], dict[str, str]]:
    topic = st.image.topics.get(change.resource_name)
    if topic is None:
        raise _Reject(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "topic does not exist")
    new = _apply_ops(topic.configs, change.ops, _TOPIC_LISTS)
    try:
        validate_topic_configs(
            new, existing=topic.configs,
            remote_storage_system_enabled=st.config.remote_log_storage_system_enable)
    except InvalidLogConfigError as exc:
        raise _Reject(ErrorCode.INVALID_CONFIG, str(exc)) from exc
    return dict(topic.configs), new


def _broker_configs(
    st: ControllerState, change: ConfigChange
) -> tuple[dict[str, str], dict[str, str]]:
    name = change.resource_name
    if name != "" and not (name.isdigit() and int(name) in st.image.brokers):
        raise _Reject(ErrorCode.INVALID_REQUEST, f"unknown broker {name!r}")
    check = st.config.broker_config_check
    for o in change.ops:
        if o.name not in DYNAMIC_BROKER_CONFIGS and check is None:
            raise _Reject(ErrorCode.INVALID_REQUEST, f"{o.name} cannot be changed dynamically")
    current = dict(st.image.broker_configs.get(name, {}))
    new = _apply_ops(current, change.ops, st.config.broker_list_configs)
    broker_only = sorted(k for k in new if k in st.config.broker_only_configs) if name == "" else []
    if broker_only:
        raise _Reject(
            ErrorCode.INVALID_REQUEST,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            + ", ".join(broker_only),
        )
    if check is not None:
        for key, value in new.items():
            problem = None if key in DYNAMIC_BROKER_CONFIGS else check(key, value)
            if problem is not None:
                raise _Reject(ErrorCode.INVALID_REQUEST, problem)
    unclean = new.get("unclean.leader.election.enable")
    if unclean is not None and unclean.strip().lower() not in _BOOL:
        raise _Reject(ErrorCode.INVALID_REQUEST, "unclean.leader.election.enable must be a boolean")
    min_isr = new.get("min.insync.replicas")
    if min_isr is not None and not (min_isr.strip().isdigit() and int(min_isr) >= 1):
        raise _Reject(ErrorCode.INVALID_REQUEST, "min.insync.replicas must be an integer >= 1")
    return current, new


def _group_configs(
    st: ControllerState, change: ConfigChange
) -> tuple[dict[str, str], dict[str, str]]:
    check = st.config.group_config_check
    if check is None:
        raise _Reject(ErrorCode.INVALID_REQUEST, "group configs are not supported")
    if not change.resource_name:
        raise _Reject(ErrorCode.INVALID_REQUEST, "the group id must not be empty")
    current = dict(st.image.group_configs.get(change.resource_name, {}))
    new = _apply_ops(current, change.ops, {})
    problem = check(new)
    if problem is not None:
        raise _Reject(ErrorCode.INVALID_CONFIG, problem)
    return current, new


_RESOURCES: dict[
    int, Callable[[ControllerState, ConfigChange], tuple[dict[str, str], dict[str, str]]]
] = {
    ConfigResourceType.TOPIC: _topic_configs,
    ConfigResourceType.BROKER: _broker_configs,
    ConfigResourceType.GROUP: _group_configs,
}


def incremental_alter_configs(
    st: ControllerState, changes: Sequence[ConfigChange], *, validate_only: bool = False
) -> ControllerResult[list[ConfigResult]]:
    records: list[MetadataRecord] = []
    results: list[ConfigResult] = []
    for change in changes:
        try:
            resource = _RESOURCES.get(change.resource_type)
            if resource is None:
                raise _Reject(
                    ErrorCode.INVALID_REQUEST, f"unsupported resource type {change.resource_type}"
                )
            old, new = resource(st, change)
        except _Reject as rej:
            results.append(
                ConfigResult(change.resource_type, change.resource_name, rej.error, rej.message)
            )
            continue
        if not validate_only:
            for name in sorted(set(old) | set(new)):
                if old.get(name) != new.get(name):
                    st.emit(
                        records,
                        ConfigRecord(
                            change.resource_type, change.resource_name, name, new.get(name)
                        ),
                    )
        results.append(ConfigResult(change.resource_type, change.resource_name, ErrorCode.NONE))
    return ControllerResult(records, results)
