"""The fixtures users configure: broker settings by marker and ini, API names in kafka_faults,
kafka_consume, and clusters shared by a module or a run - each through a pytest run of its own
(pytester), as a user's test file gets them."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

QUIET = ["-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]


def test_static_config_gets_a_broker_of_its_own_shared_by_equal_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        SEEN = {}

        @pytest.mark.kafka_broker_config(**{"num.partitions": 3})
        def test_three(kafka_broker, kafka_admin):
            SEEN["three"] = kafka_broker
            kafka_admin.create_topic("by-default", partitions=-1)
            assert kafka_admin.list_topics()["by-default"] == 3

        @pytest.mark.kafka_broker_config(**{"num.partitions": "3"})
        def test_three_again(kafka_broker):
            SEEN["again"] = kafka_broker

        def test_plain(kafka_broker, kafka_admin):
            SEEN["plain"] = kafka_broker
            kafka_admin.create_topic("plain-default", partitions=-1)
            assert kafka_admin.list_topics()["plain-default"] == 1

        def test_shared():
            assert SEEN["three"] == SEEN["again"] != SEEN["plain"]
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=180).assert_outcomes(passed=4)


def test_dynamic_config_is_set_on_the_shared_broker_and_reverted(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from kafkapy.testing.admin import KafkaAdmin
        from kafkapy.protocol import ApiKey
        from kafkapy.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse

        SEEN = []

        def retention(bootstrap):
            admin = KafkaAdmin(bootstrap)
            resource = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"])
            response = admin._send(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[resource]))
            return response.results[0].configs[0].value

        def test_before(kafka_broker):
            SEEN.append(kafka_broker)
            assert retention(kafka_broker) != "1234567"

        @pytest.mark.kafka_broker_config(**{"log.retention.ms": 1234567})
        def test_set(kafka_broker):
            SEEN.append(kafka_broker)
            assert retention(kafka_broker) == "1234567"

        def test_after(kafka_broker):
            SEEN.append(kafka_broker)
            assert retention(kafka_broker) != "1234567"
            assert len(set(SEEN)) == 1
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=180).assert_outcomes(passed=3)


def test_ini_broker_config_applies_to_every_broker(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkafka_broker_config =\n    num.partitions=2\n")
    pytester.makepyfile(
        """
        def test_two(kafka_admin):
            kafka_admin.create_topic("two", partitions=-1)
            assert kafka_admin.list_topics()["two"] == 2
        """
    )
    pytester.runpytest_subprocess(*QUIET, "--kafka-broker-mode=subprocess", timeout=180).assert_outcomes(passed=1)


def test_faults_take_kafka_api_names(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import confluent_kafka

        def test_named(kafka_broker, kafka_topic, kafka_faults):
            kafka_faults.fail("Produce", 6)
            producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker, "retry.backoff.ms": 10})
            producer.produce(kafka_topic, value=b"v")
            assert producer.flush(30) == 0
            assert [r.fault for r in kafka_faults.requests("produce")] == ["fail", None]
        """
    )
    for mode in ("thread", "subprocess"):
        pytester.runpytest_subprocess(*QUIET, f"--kafka-broker-mode={mode}", timeout=180).assert_outcomes(passed=1)


def test_kafka_consume_returns_the_first_n_records(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import confluent_kafka
        import pytest
        from kafkapy.testing.consume import ConsumeTimeout

        def test_consume(kafka_broker, kafka_topic_factory, kafka_consume):
            topic = kafka_topic_factory(partitions=2)
            producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker})
            for i in range(5):
                producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2, headers=[("h", b"x")])
            assert producer.flush(10) == 0
            records = kafka_consume(topic, 5, timeout=20)
            assert sorted(r.value for r in records) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
            assert {r.partition for r in records} == {0, 1}
            assert records[0].headers == [("h", b"x")]
            with pytest.raises(ConsumeTimeout) as caught:
                kafka_consume(topic, 6, timeout=2)
            assert len(caught.value.records) == 5
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=180).assert_outcomes(passed=1)


@pytest.mark.slow
def test_cluster_fixtures_are_shared_by_a_module_and_a_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="""
        import pytest

        pytestmark = pytest.mark.kafka_cluster(nodes=1)
        SEEN = []

        def test_one(kafka_cluster_module, kafka_cluster_session):
            SEEN.append((kafka_cluster_module.bootstrap, kafka_cluster_session.bootstrap))
            assert len(kafka_cluster_module.nodes) == 1

        def test_two(kafka_cluster_module, kafka_cluster_session):
            SEEN.append((kafka_cluster_module.bootstrap, kafka_cluster_session.bootstrap))
            assert SEEN[0] == SEEN[1]
            print("SESSION", kafka_cluster_session.bootstrap)
        """,
        test_b="""
        import pytest

        pytestmark = pytest.mark.kafka_cluster(nodes=1)

        def test_three(kafka_cluster_module, kafka_cluster_session):
            print("MODULE", kafka_cluster_module.bootstrap)
            print("SESSION", kafka_cluster_session.bootstrap)
        """,
    )
    pytester.makeini("[pytest]\nkafka_cluster_nodes = 1\n")
    result = pytester.runpytest_subprocess(*QUIET, "-s", "-v", timeout=240)
    result.assert_outcomes(passed=3)
    sessions = {line.split()[1] for line in result.outlines if line.startswith("SESSION")}
    assert len(sessions) == 1
