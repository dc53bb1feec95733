"""Config APIs as confluent-kafka's admin client uses them (librdkafka's 0081 story): list
configs emptied by SUBTRACT, dynamic broker configs and their synonyms."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from .conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)
TIMEOUT_S = 30


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _incremental(admin: AdminClient, resource: ConfigResource) -> None:
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    next(iter(futures.values())).result(timeout=TIMEOUT_S)


def _describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    result = admin.describe_configs([resource], request_timeout=TIMEOUT_S)
    entries: dict[str, ConfigEntry] = next(iter(result.values())).result(timeout=TIMEOUT_S)
    return entries


def test_subtract_that_empties_cleanup_policy_is_accepted(admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"cleanup.policy": "compact,delete"})])[
        topic_name
    ].result(timeout=TIMEOUT_S)
    for policy in ("compact", "delete"):
        _incremental(admin, ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
            ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SUBTRACT)]))
    assert _describe(admin, ConfigResource(ResourceType.TOPIC, topic_name))["cleanup.policy"].value == ""
    _incremental(admin, ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)]))
    assert _describe(admin, ConfigResource(ResourceType.TOPIC, topic_name))["cleanup.policy"].value == "compact"
