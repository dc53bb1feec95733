"""Dynamic broker configs on a single node (a quorum of one: ConfigRecords in its metadata log,
checked by `kafkapy.broker.config_rules`) over the wire: per-broker values over cluster defaults
over static ones, in effect at once and persisted."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.broker.config import ConfigSource
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from kafkapy.server.broker import Broker
from tests.server.helpers import Client, create_topic, running_broker, wait_until

pytestmark = pytest.mark.timeout(60)
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND = 0, 1, 2
Op = IncrementalAlterConfigsRequest.AlterableConfig


def _incremental(resource: str, *ops: Op, validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=BROKER, resource_name=resource,
                                                            configs=list(ops))])


async def _alter(c: Client, req: IncrementalAlterConfigsRequest) -> int:
    return int((await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, req)).responses[0].error_code)


async def _describe(c: Client, rtype: int, name: str, key: str) -> tuple[str | None, list[tuple[str, str | None, int]]]:
    resp = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(include_synonyms=True, resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                       configuration_keys=[key])]))
    [entry] = resp.results[0].configs
    return entry.value, [(s.name, s.value, s.source) for s in entry.synonyms]


async def _log_has(broker: Broker, topic: str, attr: str, value: object) -> None:
    """Partition 0 of `topic` has the config `attr` == `value`, once the node applied the change
    (it does so when the change is published)."""

    def reached() -> bool:
        plog = broker.partition_log(topic, 0)
        return plog is not None and getattr(plog.config, attr) == value

    await wait_until(reached, f"{topic}-0 has {attr}={value!r}")


async def test_layers_effect_synonyms_and_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path, **{"log.retention.hours": "100"}) as (broker, _, port):
        await create_topic(port, "t", 1)
        await create_topic(port, "own", 1, {"retention.ms": "1000"})
        node = str(broker.node_id)
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert await _alter(c, _incremental("", Op(name="log.retention.ms", config_operation=SET, value="7200000"))) == 0
            await _log_has(broker, "t", "retention_ms", 7_200_000)
            assert await _alter(c, _incremental(node, Op(name="log.retention.ms", config_operation=SET, value="3600000"))) == 0
            value, synonyms = await _describe(c, TOPIC, "t", "retention.ms")
            assert value == "3600000"
            assert synonyms == [
                ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG),
                ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                ("log.retention.hours", "100", ConfigSource.STATIC_BROKER_CONFIG),
                ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
            ]
            assert (await _describe(c, BROKER, "", "log.retention.ms"))[0] == "7200000"
            await _log_has(broker, "t", "retention_ms", 3_600_000)
            await _log_has(broker, "own", "retention_ms", 1000)
            # validate_only changes nothing; list configs take APPEND; refusals
            assert await _alter(c, _incremental(node, Op(name="log.segment.bytes", config_operation=SET, value="2048"),
                                                validate_only=True)) == 0
            assert broker.partition_log("t", 0).config.segment_bytes == 1 << 30  # type: ignore[union-attr]
            assert await _alter(c, _incremental(node, Op(name="log.cleanup.policy", config_operation=APPEND, value="compact"))) == 0
            await _log_has(broker, "t", "cleanup_policy", "delete,compact")
            assert await _alter(c, _incremental(node, Op(name="num.io.threads", config_operation=SET, value="4"))) == ErrorCode.INVALID_REQUEST
            assert await _alter(c, _incremental(node, Op(name="log.segment.bytes", config_operation=SET, value="ten"))) == ErrorCode.INVALID_REQUEST
            assert await _alter(c, _incremental("7", Op(name="log.retention.ms", config_operation=SET, value="1"))) == ErrorCode.INVALID_REQUEST
            # AlterConfigs replaces the resource's whole set: the cluster default goes
            replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                resource_type=BROKER, resource_name="", configs=[])])
            assert (await c.request(ApiKey.ALTER_CONFIGS, 2, replace)).responses[0].error_code == 0
            assert [s[2] for s in (await _describe(c, TOPIC, "t", "retention.ms"))[1]] == [
                ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG]
        await c.aclose()
    async with running_broker(tmp_path, **{"log.retention.hours": "100"}) as (broker, _, port):
        await _log_has(broker, "t", "retention_ms", 3_600_000)
        await _log_has(broker, "t", "cleanup_policy", "delete,compact")
        assert broker.config.source("log.retention.ms") == ConfigSource.DYNAMIC_BROKER_CONFIG


async def test_delete_goes_back_to_the_static_value(tmp_path: Path) -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 1)
        node = str(broker.node_id)
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert await _alter(c, _incremental(node, Op(name="message.max.bytes", config_operation=SET, value="2000"))) == 0
            await _log_has(broker, "t", "max_message_bytes", 2000)
            assert await _alter(c, _incremental(node, Op(name="message.max.bytes", config_operation=DELETE))) == 0
            await _log_has(broker, "t", "max_message_bytes", 1048588)
            value, synonyms = await _describe(c, BROKER, node, "message.max.bytes")
        await c.aclose()
    assert (value, synonyms) == ("1048588", [("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG)])


async def test_kerberos_keys_are_taken_per_broker_only(tmp_path: Path) -> None:
    """Kafka's per-broker dynamic SASL keys (the inert Kerberos ones: librdkafka's 0081 sets
    `sasl.kerberos.min.time.before.relogin` with AlterConfigs): stored for one broker, described
    as DYNAMIC_BROKER_CONFIG and kept across a restart; on the cluster default "" they are
    INVALID_REQUEST (Kafka: "broker id must be specified"), and so is a value of the wrong type
    (Kafka's code for any broker config it cannot validate, KAFKA-13609)."""
    key = "sasl.kerberos.min.time.before.relogin"
    async with running_broker(tmp_path) as (broker, _, port):
        node = str(broker.node_id)
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert await _describe(c, BROKER, node, key) == ("60000", [(key, "60000", ConfigSource.DEFAULT_CONFIG)])
            replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                resource_type=BROKER, resource_name=node,
                configs=[AlterConfigsRequest.AlterableConfig(name=key, value="58000")])])
            assert (await c.request(ApiKey.ALTER_CONFIGS, 1, replace)).responses[0].error_code == 0
            assert await _describe(c, BROKER, node, key) == ("58000", [
                (key, "58000", ConfigSource.DYNAMIC_BROKER_CONFIG), (key, "60000", ConfigSource.DEFAULT_CONFIG)])
            assert await _alter(c, _incremental(node, Op(name="sasl.kerberos.service.name", config_operation=SET,
                                                         value="kafka"))) == 0
            assert await _alter(c, _incremental("", Op(name=key, config_operation=SET, value="1000"))) == ErrorCode.INVALID_REQUEST
            assert await _alter(c, _incremental(node, Op(name=key, config_operation=SET, value="soon"))) == ErrorCode.INVALID_REQUEST
            assert await _alter(c, _incremental(node, Op(name="sasl.kerberos.ticket.renew.jitter", config_operation=SET,
                                                         value="x"))) == ErrorCode.INVALID_REQUEST
            # GSSAPI itself stays unavailable: not a dynamic key
            assert await _alter(c, _incremental(node, Op(name="sasl.enabled.mechanisms", config_operation=SET,
                                                         value="GSSAPI"))) == ErrorCode.INVALID_REQUEST
        await c.aclose()
    async with running_broker(tmp_path) as (broker, _, port):
        assert broker.config.get(key) == "58000"
        assert broker.config.source(key) == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert broker.config.get("sasl.kerberos.service.name") == "kafka"
