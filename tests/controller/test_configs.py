"""Config changes in the controller: GROUP resources (KIP-848 group configs) as ConfigRecords."""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy.controller.controller import ConfigChange, ConfigOp, ControllerConfig, NewTopic
from kafkapy.controller.records import ConfigRecord, ConfigResourceType
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import CLUSTER_ID, Cluster

G = ConfigResourceType.GROUP
SET, DELETE, APPEND = 0, 1, 2


def _check(configs: Mapping[str, str]) -> str | None:
    """A stand-in for the group coordinator's table: one key, an int of at least 10."""
    for name, value in configs.items():
        if name != "consumer.session.timeout.ms":
            return f"Unknown group config name: {name}"
        if not value.isdigit() or int(value) < 10:
            return f"bad {name}"
    return None


def _cluster(check: bool = True) -> Cluster:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, group_config_check=_check if check else None))
    c.start(1)
    return c


def _alter(c: Cluster, group: str, *ops: ConfigOp, validate_only: bool = False) -> ErrorCode:
    [r] = c.run(c.ctl.incremental_alter_configs([ConfigChange(G, group, list(ops))], validate_only=validate_only))
    return r.error


def test_group_configs_are_config_records_of_the_group_and_need_no_group() -> None:
    c = _cluster()
    result = c.ctl.incremental_alter_configs(
        [ConfigChange(G, "never-joined", [ConfigOp("consumer.session.timeout.ms", SET, "50")])]
    )
    assert result.records == [ConfigRecord(G, "never-joined", "consumer.session.timeout.ms", "50")]
    c.run(result)
    assert c.replica.group_configs == {"never-joined": {"consumer.session.timeout.ms": "50"}}
    assert c.last_delta.changed_group_configs == {"never-joined"}
    assert _alter(c, "never-joined", ConfigOp("consumer.session.timeout.ms", DELETE, None)) is ErrorCode.NONE
    assert c.replica.group_configs == {}


def test_bad_group_configs_are_refused_and_change_nothing() -> None:
    c = _cluster()
    assert _alter(c, "g", ConfigOp("consumer.session.timeout.ms", SET, "5")) is ErrorCode.INVALID_CONFIG
    assert _alter(c, "g", ConfigOp("share.record.lock.duration.ms", SET, "50")) is ErrorCode.INVALID_CONFIG
    assert _alter(c, "g", ConfigOp("consumer.session.timeout.ms", APPEND, "50")) is ErrorCode.INVALID_CONFIG
    assert _alter(c, "", ConfigOp("consumer.session.timeout.ms", SET, "50")) is ErrorCode.INVALID_REQUEST
    assert _alter(c, "g", ConfigOp("consumer.session.timeout.ms", SET, "50"), validate_only=True) is ErrorCode.NONE
    assert c.ctl.image.group_configs == {}


def test_without_a_group_check_group_configs_are_not_supported() -> None:
    c = _cluster(check=False)
    assert _alter(c, "g", ConfigOp("consumer.session.timeout.ms", SET, "50")) is ErrorCode.INVALID_REQUEST


def test_group_configs_survive_a_snapshot() -> None:
    c = _cluster()
    _alter(c, "g", ConfigOp("consumer.session.timeout.ms", SET, "50"))
    _, loaded = decode_snapshot(encode_snapshot(c.ctl.image, end_offset=c.ctl.image.offset + 1, epoch=1, timestamp_ms=0))
    assert loaded.group_configs == {"g": {"consumer.session.timeout.ms": "50"}}


def test_list_typed_broker_configs_take_append_and_subtract() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, broker_config_check=lambda name, value: None,
                                 broker_list_configs={"log.cleanup.policy": "delete"}))
    c.start(1)
    B = ConfigResourceType.BROKER

    def alter(*ops: ConfigOp) -> ErrorCode:
        [r] = c.run(c.ctl.incremental_alter_configs([ConfigChange(B, "", list(ops))]))
        return r.error

    assert alter(ConfigOp("log.cleanup.policy", APPEND, "compact")) is ErrorCode.NONE
    assert c.replica.broker_configs[""] == {"log.cleanup.policy": "delete,compact"}
    assert alter(ConfigOp("log.cleanup.policy", 3, "delete,nothing")) is ErrorCode.NONE
    assert c.replica.broker_configs[""] == {"log.cleanup.policy": "compact"}
    assert alter(ConfigOp("log.retention.ms", APPEND, "1")) is ErrorCode.INVALID_CONFIG
    assert c.replica.broker_configs[""] == {"log.cleanup.policy": "compact"}


def test_per_broker_only_configs_are_refused_on_the_cluster_default() -> None:
    """Kafka's per-broker dynamic keys (listener and SASL settings) name a broker id: on the
    cluster default "" they are INVALID_REQUEST and nothing is written; deleting one there (as
    AlterConfigs' replace does for every name) is no error."""
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, broker_config_check=lambda name, value: None,
                                 broker_only_configs=frozenset({"sasl.kerberos.service.name"})))
    c.start(1)
    B = ConfigResourceType.BROKER

    def alter(name: str, *ops: ConfigOp) -> ErrorCode:
        [r] = c.run(c.ctl.incremental_alter_configs([ConfigChange(B, name, list(ops))]))
        return r.error

    assert alter("", ConfigOp("sasl.kerberos.service.name", SET, "kafka")) is ErrorCode.INVALID_REQUEST
    assert "" not in c.replica.broker_configs
    assert alter("", ConfigOp("sasl.kerberos.service.name", DELETE, None),
                 ConfigOp("log.retention.ms", SET, "1")) is ErrorCode.NONE
    assert alter("1", ConfigOp("sasl.kerberos.service.name", SET, "kafka")) is ErrorCode.NONE
    assert c.replica.broker_configs == {"": {"log.retention.ms": "1"}, "1": {"sasl.kerberos.service.name": "kafka"}}


def test_tiered_topics_are_refused_unless_the_broker_has_remote_storage() -> None:
    for enabled in (False, True):
        c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, remote_log_storage_system_enable=enabled))
        c.start(1)
        [res] = c.run(c.ctl.create_topics([NewTopic("t", 1, 1, configs={"remote.storage.enable": "true"})]))
        if enabled:
            assert res.error is ErrorCode.NONE
            continue
        assert res.error is ErrorCode.INVALID_CONFIG
        assert res.message is not None
        assert res.message.startswith("Tiered Storage functionality is disabled in the broker.")
        c.run(c.ctl.create_topics([NewTopic("t", 1, 1)]))
        [r] = c.run(c.ctl.incremental_alter_configs([ConfigChange(
            ConfigResourceType.TOPIC, "t", [ConfigOp("remote.storage.enable", SET, "true")])]))
        assert r.error is ErrorCode.INVALID_CONFIG


def test_turning_a_tiered_topic_off_needs_remote_log_delete_on_disable() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, remote_log_storage_system_enable=True))
    c.start(1)
    c.run(c.ctl.create_topics([NewTopic("t", 1, 1, configs={"remote.storage.enable": "true"})]))
    T = ConfigResourceType.TOPIC
    [r] = c.run(c.ctl.incremental_alter_configs(
        [ConfigChange(T, "t", [ConfigOp("remote.storage.enable", SET, "false")])]))
    assert r.error is ErrorCode.INVALID_CONFIG
    assert r.message is not None
    assert "without deleting remote data" in r.message
    [r] = c.run(c.ctl.incremental_alter_configs([ConfigChange(T, "t", [
        ConfigOp("remote.storage.enable", SET, "false"),
        ConfigOp("remote.log.delete.on.disable", SET, "true")])]))
    assert r.error is ErrorCode.NONE
