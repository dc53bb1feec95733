"""GROUP config resources (KIP-848 group configs) on a single node, over the wire: describe and
alter with both alter APIs, the checks, persistence, and the coordinator applying them."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.broker.config import BROKER_CONFIGS, BrokerConfig
from kafkapy.broker.config_rules import group_config_from
from kafkapy.coordinator.group import GROUP_CONFIGS
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.config_types import ConfigSource, ConfigType
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from tests.broker.handlers.test_consumer_groups import beat
from tests.server.helpers import Client, create_topic, find_coordinator, running_broker

pytestmark = pytest.mark.timeout(90)
GROUP = 32
SET, DELETE, APPEND = 0, 1, 2
Op = IncrementalAlterConfigsRequest.AlterableConfig
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def incremental(group: str, *ops: Op, validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(resource_type=GROUP, resource_name=group,
                                                            configs=list(ops))])


async def alter(c: Client, group: str, *ops: Op, validate_only: bool = False) -> tuple[int, str | None]:
    r = (await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, incremental(group, *ops, validate_only=validate_only))).responses[0]
    assert (r.resource_type, r.resource_name) == (GROUP, group)
    return int(r.error_code), r.error_message


async def describe(c: Client, group: str) -> tuple[int, dict[str, tuple[str | None, int, int, list[tuple[str, int]]]]]:
    resp = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(
        include_synonyms=True, include_documentation=True,
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=GROUP, resource_name=group)]))
    [result] = resp.results
    return int(result.error_code), {
        e.name: (e.value, e.config_source, e.config_type, [(s.name, s.source) for s in e.synonyms])
        for e in result.configs
    }


async def test_describe_lists_the_brokers_defaults_for_a_group_nobody_configured() -> None:
    async with running_broker(None, **{"group.consumer.heartbeat.interval.ms": "6000"}) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            code, configs = await describe(c, "no-such-group")
        assert code == ErrorCode.NONE
        assert configs == {
            SESSION: ("45000", ConfigSource.DEFAULT_CONFIG, ConfigType.INT,
                      [("group.consumer.session.timeout.ms", ConfigSource.DEFAULT_CONFIG)]),
            HEARTBEAT: ("6000", ConfigSource.DEFAULT_CONFIG, ConfigType.INT,
                        [("group.consumer.heartbeat.interval.ms", ConfigSource.STATIC_BROKER_CONFIG),
                         ("group.consumer.heartbeat.interval.ms", ConfigSource.DEFAULT_CONFIG)]),
            # Kafka 4.0's share group configs, with their group.share.* defaults
            "share.session.timeout.ms": ("45000", ConfigSource.DEFAULT_CONFIG, ConfigType.INT,
                                         [("group.share.session.timeout.ms", ConfigSource.DEFAULT_CONFIG)]),
            "share.heartbeat.interval.ms": ("5000", ConfigSource.DEFAULT_CONFIG, ConfigType.INT,
                                            [("group.share.heartbeat.interval.ms", ConfigSource.DEFAULT_CONFIG)]),
            "share.record.lock.duration.ms": (
                "30000", ConfigSource.DEFAULT_CONFIG, ConfigType.INT,
                [("group.share.record.lock.duration.ms", ConfigSource.DEFAULT_CONFIG)]),
            "share.auto.offset.reset": ("latest", ConfigSource.DEFAULT_CONFIG, ConfigType.STRING, []),
        }


async def test_set_describe_delete_and_persist_across_a_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert await alter(c, "g", Op(name=SESSION, config_operation=SET, value="50000"),
                               Op(name=HEARTBEAT, config_operation=SET, value="7000"),
                               Op(name="share.auto.offset.reset", config_operation=SET, value="earliest"),
                               Op(name="share.record.lock.duration.ms", config_operation=SET, value="20000")
                               ) == (0, None)
            _, configs = await describe(c, "g")
            assert configs[SESSION][:2] == ("50000", ConfigSource.DYNAMIC_GROUP_CONFIG)
            assert configs[SESSION][3][0] == (SESSION, ConfigSource.DYNAMIC_GROUP_CONFIG)
            assert configs[HEARTBEAT][:2] == ("7000", ConfigSource.DYNAMIC_GROUP_CONFIG)
            assert (await describe(c, "other"))[1][SESSION][:2] == ("45000", ConfigSource.DEFAULT_CONFIG)
            assert await alter(c, "g", Op(name=HEARTBEAT, config_operation=DELETE, value=None)) == (0, None)
    async with running_broker(tmp_path) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            _, configs = await describe(c, "g")
        assert configs[SESSION][:2] == ("50000", ConfigSource.DYNAMIC_GROUP_CONFIG)
        assert configs[HEARTBEAT][:2] == ("5000", ConfigSource.DEFAULT_CONFIG)
        assert configs["share.auto.offset.reset"][:2] == ("earliest", ConfigSource.DYNAMIC_GROUP_CONFIG)
        assert configs["share.record.lock.duration.ms"][:2] == ("20000", ConfigSource.DYNAMIC_GROUP_CONFIG)


async def test_bad_group_configs_are_refused_with_kafkas_codes() -> None:
    async with running_broker(None) as (broker, _, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            code, message = await alter(c, "g", Op(name=SESSION, config_operation=SET, value="1000"))
            assert code == ErrorCode.INVALID_CONFIG
            assert message is not None
            assert "group.consumer.min.session.timeout.ms" in message
            assert (await alter(c, "g", Op(name=HEARTBEAT, config_operation=SET, value="x")))[0] == ErrorCode.INVALID_CONFIG
            assert (await alter(c, "g", Op(name="share.session.timeout.ms", config_operation=SET, value="44999")))[0] == ErrorCode.INVALID_CONFIG
            assert (await alter(c, "g", Op(name="share.auto.offset.reset", config_operation=SET, value="none")))[0] == ErrorCode.INVALID_CONFIG
            assert (await alter(c, "g", Op(name="share.isolation.level", config_operation=SET, value="read_committed")))[0] == ErrorCode.INVALID_CONFIG
            assert (await alter(c, "g", Op(name=SESSION, config_operation=APPEND, value="1")))[0] == ErrorCode.INVALID_CONFIG
            assert (await alter(c, "", Op(name=SESSION, config_operation=SET, value="50000")))[0] == ErrorCode.INVALID_REQUEST
            assert await alter(c, "g", Op(name=SESSION, config_operation=SET, value="50000"), validate_only=True) == (0, None)
            assert (await describe(c, ""))[0] == ErrorCode.INVALID_REQUEST
            _, configs = await describe(c, "g")
            assert {source for _, source, _, _ in configs.values()} == {ConfigSource.DEFAULT_CONFIG}
        assert broker.config.group_configs == {}


async def test_alter_configs_replaces_a_groups_whole_set() -> None:
    async with running_broker(None) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            assert (await alter(c, "g", Op(name=SESSION, config_operation=SET, value="50000")))[0] == 0
            replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                resource_type=GROUP, resource_name="g",
                configs=[AlterConfigsRequest.AlterableConfig(name=HEARTBEAT, value="8000")])])
            assert (await c.request(ApiKey.ALTER_CONFIGS, 2, replace)).responses[0].error_code == 0
            _, configs = await describe(c, "g")
        assert configs[SESSION][:2] == ("45000", ConfigSource.DEFAULT_CONFIG)
        assert configs[HEARTBEAT][:2] == ("8000", ConfigSource.DYNAMIC_GROUP_CONFIG)


async def test_the_coordinator_gives_members_the_groups_heartbeat_interval() -> None:
    async with running_broker(None) as (_, _, port):
        c = await Client.connect(port)
        await find_coordinator(c, "g")
        with trio.fail_after(60):
            await create_topic(port, "t", 2)
            a = await beat(c, member_id="a", member_epoch=0, subscribed_topic_names=["t"], topic_partitions=[])
            assert (a.error_code, a.heartbeat_interval_ms) == (ErrorCode.NONE, 5000)
            assert (await alter(c, "g", Op(name=HEARTBEAT, config_operation=SET, value="12000")))[0] == 0
            again = await beat(c, member_id="a", member_epoch=a.member_epoch)
            assert (again.error_code, again.heartbeat_interval_ms) == (ErrorCode.NONE, 12000)
            other = await beat(c, group_id="h", member_id="b", member_epoch=0, subscribed_topic_names=["t"],
                               topic_partitions=[])
            assert other.heartbeat_interval_ms == 5000


def test_the_bounds_are_broker_keys_and_reach_the_coordinator() -> None:
    config = BrokerConfig({"group.consumer.min.session.timeout.ms": "1000",
                           "group.consumer.max.heartbeat.interval.ms": "20000"})
    settings = group_config_from(config)
    assert (settings.consumer_min_session_timeout_ms, settings.consumer_max_session_timeout_ms) == (1000, 60000)
    assert (settings.consumer_min_heartbeat_interval_ms, settings.consumer_max_heartbeat_interval_ms) == (5000, 20000)
    assert settings.group_overrides is config.group_configs  # a live view, not a copy
    for name in ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
                 "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"):
        assert name in BROKER_CONFIGS
    share = group_config_from(BrokerConfig({"group.share.min.record.lock.duration.ms": "2000",
                                            "group.share.max.session.timeout.ms": "90000"}))
    assert (share.share_min_record_lock_duration_ms, share.share_max_record_lock_duration_ms) == (2000, 60000)
    assert (share.share_min_session_timeout_ms, share.share_max_session_timeout_ms) == (45000, 90000)
    # every broker key the group config table names (defaults and bounds) is a broker config
    for key in GROUP_CONFIGS.values():
        for name in (key.broker_default, key.min_key, key.max_key):
            assert name is None or name in BROKER_CONFIGS
