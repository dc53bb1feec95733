"""The pytest plugin as a user gets it: installed through the `pytest11` entry point, its
fixtures running a user's test file in a separate pytest process (pytester)."""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "test_kafka_fixtures.py"
QUIET = ["-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    found = [e for e in importlib.metadata.entry_points(group="pytest11") if "kafkapy" in e.value]
    assert [e.value for e in found] == ["kafkapy.testing.pytest_plugin"]


@pytest.mark.parametrize("mode", ["thread", "subprocess"])
def test_readme_examples_pass_in_both_broker_modes(pytester: pytest.Pytester, mode: str) -> None:
    shutil.copy(EXAMPLES, pytester.path / "test_examples.py")
    result = pytester.runpytest_subprocess(*QUIET, f"--kafka-broker-mode={mode}", timeout=240)
    result.assert_outcomes(passed=6)


def test_the_plugin_starts_nothing_for_tests_that_do_not_ask(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import sys, threading

        def test_plain():
            assert "kafkapy.server.app" not in sys.modules
            assert not [t for t in threading.enumerate() if t.name.startswith("kafkapy")]
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=120).assert_outcomes(passed=1)


@pytest.mark.parametrize(("scope", "distinct"), [("session", 1), ("function", 2)])
def test_broker_scope_option(pytester: pytest.Pytester, scope: str, distinct: int) -> None:
    pytester.makepyfile(
        """
        SEEN = []

        def test_one(kafka_broker):
            SEEN.append(kafka_broker)

        def test_two(kafka_broker):
            SEEN.append(kafka_broker)

        def test_count(request):
            print("DISTINCT", len(set(SEEN)))
        """
    )
    result = pytester.runpytest_subprocess(*QUIET, "-s", f"--kafka-broker-scope={scope}", timeout=120)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"*DISTINCT {distinct}*"])


def test_bad_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nkafka_broker_mode = docker\n")
    pytester.makepyfile("def test_x(kafka_broker):\n    pass\n")
    result = pytester.runpytest_subprocess(*QUIET, timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kafka_broker_mode must be one of thread, subprocess, not 'docker'*"])


def test_topic_factory_topics_exist_during_the_test_and_are_deleted_after(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        NAMES = []

        def test_make(kafka_admin, kafka_topic_factory):
            name = kafka_topic_factory(partitions=4, configs={"cleanup.policy": "compact"})
            NAMES.append(name)
            assert kafka_admin.list_topics()[name] == 4

        def test_gone(kafka_admin):
            assert NAMES[0] not in kafka_admin.list_topics()
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=120).assert_outcomes(passed=2)


def test_subprocess_broker_pause_looks_like_a_hung_broker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import socket
        import pytest
        from kafkapy.testing.admin import AdminError, KafkaAdmin

        def test_pause(kafka_broker, kafka_broker_instance):
            kafka_broker_instance.pause()
            with pytest.raises((AdminError, OSError)):
                KafkaAdmin(kafka_broker, timeout_s=1).list_topics()
            kafka_broker_instance.resume()
            KafkaAdmin(kafka_broker).create_topic("after-pause", 2)
            assert KafkaAdmin(kafka_broker).list_topics()["after-pause"] == 2
        """
    )
    pytester.runpytest_subprocess(*QUIET, "--kafka-broker-mode=subprocess", timeout=120).assert_outcomes(passed=1)


def test_cluster_fixture_serves_rf3_through_kill_pause_and_restart(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import confluent_kafka
        import pytest
        from kafkapy.protocol import ApiKey
        from kafkapy.protocol.errors import ErrorCode
        from kafkapy.testing.admin import KafkaAdmin

        def produce(bootstrap, topic, value):
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                                 "message.timeout.ms": 60000})
            producer.produce(topic, value=value)
            assert producer.flush(60) == 0

        @pytest.mark.kafka_cluster(nodes=3)
        def test_cluster(kafka_cluster):
            assert sorted(kafka_cluster.live()) == [1, 2, 3]
            KafkaAdmin(kafka_cluster.bootstrap).create_topic("rf3", 1, 3)
            produce(kafka_cluster.bootstrap, "rf3", b"a")
            kafka_cluster.pause(3)
            kafka_cluster.resume(3)
            kafka_cluster.kill(2)
            produce(kafka_cluster.bootstrap_of(1, 3), "rf3", b"b")
            kafka_cluster.restart(2)
            faults = kafka_cluster.faults(2)
            faults.fail(ApiKey.METADATA, ErrorCode.UNKNOWN_SERVER_ERROR, count=1)
            assert [r.action.kind for r in faults.rules()] == ["fail"]
            produce(kafka_cluster.bootstrap_of(2), "rf3", b"c")
            assert "fail" in [r.fault for r in faults.requests(ApiKey.METADATA)]
        """
    )
    pytester.runpytest_subprocess(*QUIET, timeout=280).assert_outcomes(passed=1)
