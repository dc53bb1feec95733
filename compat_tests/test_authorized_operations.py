"""Authorized operations as confluent-kafka's admin client asks for them (librdkafka's 0081):
a Kafka without an authorizer answers every operation the resource supports."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic  # type: ignore[attr-defined]

from .conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)
TIMEOUT_S = 30


def test_describe_cluster_and_topics_report_every_supported_operation(
    broker: BrokerProcess, topic_name: str
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=TIMEOUT_S)
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=TIMEOUT_S)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    described = admin.describe_topics(
        TopicCollection([topic_name]), include_authorized_operations=True
    )[topic_name].result(timeout=TIMEOUT_S)
    assert set(described.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
    plain = admin.describe_cluster().result(timeout=TIMEOUT_S)
    assert not plain.authorized_operations  # not asked: none reported
