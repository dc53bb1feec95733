"""BROKER_LOGGER resources over the wire on a single node: DescribeConfigs lists the loggers,
IncrementalAlterConfigs changes a level that then takes effect, AlterConfigs refuses them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.config_types import ConfigSource
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)
from tests.server.helpers import Client, running_broker

pytestmark = pytest.mark.timeout(60)
BROKER_LOGGER, TOPIC = 8, 2
SET, DELETE, APPEND = 0, 1, 2
Op = IncrementalAlterConfigsRequest.AlterableConfig
LOGGER = "kafkapy.server.broker"


@pytest.fixture(autouse=True)
def restore_level() -> Iterator[None]:
    logger = logging.getLogger(LOGGER)
    level = logger.level
    yield
    logger.setLevel(level)


def logger_resource(node: str, *ops: Op) -> IncrementalAlterConfigsRequest.AlterConfigsResource:
    return IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=BROKER_LOGGER, resource_name=node, configs=list(ops))


async def describe(c: Client, node: str, keys: list[str] | None = None) -> tuple[int, dict[str, tuple[str | None, int]]]:
    resp = await c.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER_LOGGER, resource_name=node,
                                                       configuration_keys=keys)]))
    [result] = resp.results
    return int(result.error_code), {e.name: (e.value, e.config_source) for e in result.configs}


async def test_describe_and_set_a_loggers_level() -> None:
    async with running_broker(None) as (broker, _, port):
        node = str(broker.node_id)
        c = await Client.connect(port)
        with trio.fail_after(30):
            code, loggers = await describe(c, node)
            assert code == ErrorCode.NONE
            assert {"root", LOGGER} <= set(loggers)
            assert {source for _, source in loggers.values()} == {ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG}
            answer = await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(
                resources=[logger_resource(node, Op(name=LOGGER, config_operation=SET, value="TRACE"))]))
            assert answer.responses[0].error_code == ErrorCode.NONE
            assert await describe(c, node, [LOGGER]) == (
                ErrorCode.NONE, {LOGGER: ("TRACE", ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG)})
            assert logging.getLogger(LOGGER).isEnabledFor(logging.DEBUG)
            answer = await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(
                resources=[logger_resource(node, Op(name=LOGGER, config_operation=DELETE, value=None))]))
            assert answer.responses[0].error_code == ErrorCode.NONE
            assert logging.getLogger(LOGGER).level == logging.NOTSET


async def test_refusals_with_kafkas_codes() -> None:
    async with running_broker(None) as (broker, _, port):
        node = str(broker.node_id)
        c = await Client.connect(port)
        before = logging.getLogger(LOGGER).level
        with trio.fail_after(30):
            answer = await c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, IncrementalAlterConfigsRequest(resources=[
                logger_resource(node, Op(name=LOGGER, config_operation=SET, value="LOUD")),
                logger_resource(node, Op(name="no.such.logger", config_operation=SET, value="DEBUG")),
                logger_resource(node, Op(name=LOGGER, config_operation=APPEND, value="DEBUG")),
                logger_resource("", Op(name=LOGGER, config_operation=SET, value="DEBUG")),
                logger_resource("7", Op(name=LOGGER, config_operation=SET, value="DEBUG")),
            ]))
            assert [r.error_code for r in answer.responses] == [
                ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_CONFIG, ErrorCode.INVALID_REQUEST,
                ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST,
            ]
            legacy = await c.request(ApiKey.ALTER_CONFIGS, 2, AlterConfigsRequest(resources=[
                AlterConfigsRequest.AlterConfigsResource(resource_type=BROKER_LOGGER, resource_name=node, configs=[
                    AlterConfigsRequest.AlterableConfig(name=LOGGER, value="DEBUG")])]))
            assert legacy.responses[0].error_code == ErrorCode.INVALID_REQUEST
            assert (await describe(c, "7"))[0] == ErrorCode.INVALID_REQUEST
        assert logging.getLogger(LOGGER).level == before
