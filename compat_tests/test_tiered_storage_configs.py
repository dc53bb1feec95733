"""Tiered-storage topic configs as a real client meets them (confluent-kafka's AdminClient
against `kafkapy serve`). With `remote.log.storage.system.enable=false`, Kafka's default,
asking for remote storage is refused as Apache Kafka refuses it, never accepted and silently
ignored (a test passing here would otherwise fail on Kafka); with it on, a delete-policy topic
may be tiered, a compacted one is refused with Kafka's message, and the `rsm.config.*` settings
(credentials among them) are not shown by DescribeConfigs."""

from __future__ import annotations

from pathlib import Path

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

from .conftest import BrokerFactory, BrokerProcess

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


COMPACTED_MESSAGE = "Remote log storage only supports topics with cleanup.policy=delete"


@pytest.fixture
def tiering_admin(broker_factory: BrokerFactory, tmp_path: Path) -> AdminClient:
    """A broker with tiering on; its object store need not answer for topic configs."""
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = AKIA-TEST\n"
                           "aws_secret_access_key = very-secret-value\n")
    settings = {"remote.log.storage.system.enable": "true",
                "rsm.config.storage.s3.bucket.name": "kafkapy-tiered",
                "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:9",
                "rsm.config.storage.aws.credentials.file": str(credentials)}
    broker = broker_factory.start(
        extra_args=[a for k, v in settings.items() for a in ("--override", f"{k}={v}")])
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_remote_storage_is_accepted_when_the_broker_has_tiering(
        tiering_admin: AdminClient, topic_name: str) -> None:
    configs = {"remote.storage.enable": "true", "local.retention.bytes": "1048576"}
    futures = tiering_admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)],
                                          request_timeout=TIMEOUT_S)
    futures[topic_name].result(timeout=TIMEOUT_S)
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    described = tiering_admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert described["remote.storage.enable"].value == "true"
    assert described["local.retention.bytes"].value == "1048576"


def test_compacted_topic_cannot_be_tiered(tiering_admin: AdminClient, topic_name: str) -> None:
    configs = {"remote.storage.enable": "true", "cleanup.policy": "compact"}
    futures = tiering_admin.create_topics([NewTopic(topic_name, 1, 1, config=configs)],
                                          request_timeout=TIMEOUT_S)
    with pytest.raises(KafkaException) as info:
        futures[topic_name].result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert COMPACTED_MESSAGE in info.value.args[0].str()


def test_describe_broker_configs_shows_no_remote_storage_settings(
        tiering_admin: AdminClient) -> None:
    resource = ConfigResource(ResourceType.BROKER, "1")
    described = tiering_admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert described["remote.log.storage.system.enable"].value == "true"
    assert not [name for name in described if name.startswith("rsm.config.")]
    assert not [e for e in described.values() if e.value and "very-secret" in e.value]
