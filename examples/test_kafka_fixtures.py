"""Example tests using kafkapy's pytest fixtures (README "Testing with pytest").

Run with `pytest examples/test_kafka_fixtures.py` anywhere kafkapy, confluent-kafka and
kafka-python are installed; tests/testing/test_pytest_plugin.py runs this file in both broker
modes, so the README's examples stay true.
"""

import confluent_kafka
import kafka
import pytest
from kafka.errors import TopicAuthorizationFailedError

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode


def test_confluent_kafka_roundtrip(kafka_broker, kafka_topic):
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker})
    producer.produce(kafka_topic, key=b"k", value=b"hello")
    assert producer.flush(10) == 0

    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": kafka_broker,
        "group.id": "example",
        "auto.offset.reset": "earliest",
    })
    consumer.subscribe([kafka_topic])
    try:
        message = None
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        assert message is not None
        assert message.value() == b"hello"
    finally:
        consumer.close()


def test_confluent_kafka_retries_a_produce_the_broker_failed(kafka_broker, kafka_topic, kafka_faults):
    # the next two Produce requests get NOT_LEADER_OR_FOLLOWER (retriable): the client retries
    kafka_faults.fail(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, count=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker, "retry.backoff.ms": 10})
    producer.produce(kafka_topic, value=b"survives")
    assert producer.flush(30) == 0
    faults = [r.fault for r in kafka_faults.requests(ApiKey.PRODUCE)]
    assert faults == ["fail", "fail", None]


def test_kafka_python_roundtrip(kafka_broker, kafka_topic_factory):
    topic = kafka_topic_factory(partitions=3)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker)
    for i in range(3):
        producer.send(topic, value=b"m%d" % i, partition=i).get(timeout=10)
    producer.close()

    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=kafka_broker,
                                   auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    values = []
    for message in consumer:  # ends after consumer_timeout_ms without a message
        values.append(message.value)
        if len(values) == 3:
            break
    consumer.close()
    assert sorted(values) == [b"m0", b"m1", b"m2"]


def test_kafka_python_sees_a_non_retriable_error(kafka_broker, kafka_topic, kafka_faults):
    # every Produce fails with TOPIC_AUTHORIZATION_FAILED until the fixture clears the rule
    kafka_faults.fail(ApiKey.PRODUCE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, count=None)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_broker, retries=0)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send(kafka_topic, b"refused").get(timeout=10)
    producer.close(timeout=5)


def test_produce_survives_a_leader_error(kafka_broker, kafka_topic, kafka_faults, kafka_consume):
    # the README's example: faults by Kafka's names, the records read back with kafka_consume
    kafka_faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER", count=2)   # the client retries
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker, "retry.backoff.ms": 10})
    producer.produce(kafka_topic, value=b"survives")
    assert producer.flush(30) == 0
    assert [r.value for r in kafka_consume(kafka_topic, 1)] == [b"survives"]


@pytest.mark.kafka_broker_config(**{"log.retention.ms": 3_600_000, "num.partitions": 3})
def test_broker_settings_per_test(kafka_admin):
    # num.partitions is static (a broker of its own), log.retention.ms dynamic (set, then reverted)
    kafka_admin.create_topic("three-partitions", partitions=-1)
    assert kafka_admin.list_topics()["three-partitions"] == 3
