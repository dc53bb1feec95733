"""Tiered-storage topic configs as a real client meets them (confluent-kafka's AdminClient
against `kafkapy serve`, whose broker has `remote.log.storage.system.enable=false`, Kafka's
default): asking for remote storage is refused as Apache Kafka refuses it, never accepted and
silently ignored (a test passing here would otherwise fail on Kafka)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
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
KAFKAS_MESSAGE = "Tiered Storage functionality is disabled in the broker"


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_create_topic_with_remote_storage_is_invalid_config(admin: AdminClient, topic_name: str) -> None:
    futures = admin.create_topics(
        [NewTopic(topic_name, 1, 1, config={"remote.storage.enable": "true"})],
        request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as info:
        futures[topic_name].result(timeout=TIMEOUT_S)
    error: KafkaError = info.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert KAFKAS_MESSAGE in error.str()
    assert topic_name not in admin.list_topics(timeout=TIMEOUT_S).topics


def test_enabling_remote_storage_on_an_existing_topic_is_invalid_config(
        admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=TIMEOUT_S)
    resource = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET)])
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as info:
        next(iter(futures.values())).result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
