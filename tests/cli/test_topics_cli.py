"""`kafkapy topics ...` and `kafkapy configs ...` against a real broker subprocess."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from tests.cli.conftest import kafkapy
from tests.server.helpers import Client, find_coordinator


async def _look_up_a_group_coordinator(port: int) -> None:
    client = await Client.connect(port)
    try:
        await find_coordinator(client, "t-life-readers")
    finally:
        await client.aclose()


def test_create_describe_alter_delete(bootstrap: str) -> None:
    r = kafkapy("topics", "create", "t-life", "--partitions", "3", "--config", "retention.ms=123456",
                "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.json() == [{"topic": "t-life", "created": True, "partitions": 3, "replication_factor": 1,
                         "topic_id": r.json()[0]["topic_id"]}]
    again = kafkapy("topics", "create", "t-life", bootstrap=bootstrap)
    assert again.code == 1
    assert "TOPIC_ALREADY_EXISTS (error code 36)" in again.stderr
    assert "--if-not-exists" in again.stderr
    assert kafkapy("topics", "create", "t-life", "--if-not-exists", bootstrap=bootstrap).code == 0

    listed = kafkapy("topics", "list", "--exclude-internal", "--json", bootstrap=bootstrap).json()
    assert {"topic": "t-life", "partitions": 3, "replication_factor": 1, "internal": False} in [
        {k: v for k, v in t.items() if k != "topic_id"} for t in listed]
    assert all(not t["internal"] for t in listed)
    # __consumer_offsets is made by the first group coordinator look-up (as in Kafka)
    trio.run(_look_up_a_group_coordinator, int(bootstrap.rsplit(":", 1)[1]))
    with_internal = kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()
    assert any(t["topic"] == "__consumer_offsets" and t["internal"] for t in with_internal)

    assert kafkapy("produce", "t-life", "--partition", "1", stdin="a\nbb\nccc\n", bootstrap=bootstrap).code == 0
    described = kafkapy("topics", "describe", "t-life", "--json", bootstrap=bootstrap).json()
    (topic,) = described
    assert topic["configs"]["retention.ms"] == "123456"
    parts = {p["partition"]: p for p in topic["partitions"]}
    assert sorted(parts) == [0, 1, 2]
    assert parts[1]["log_start_offset"] == 0
    assert parts[1]["log_end_offset"] == 3
    assert parts[1]["size_bytes"] > 0
    assert parts[0]["log_end_offset"] == 0
    assert parts[1]["leader"] == 1
    assert parts[1]["replicas"] == [1]
    assert parts[1]["isr"] == [1]
    assert parts[1]["offline_replicas"] == []
    human = kafkapy("topics", "describe", "t-life", bootstrap=bootstrap)
    assert "retention.ms=123456" in human.stdout
    assert any(line.split()[:7] == ["1", "1", "1", "1", "-", "0", "3"] for line in human.stdout.splitlines())
    none_short = kafkapy("topics", "describe", "t-life", "--under-replicated-partitions", "--json",
                         bootstrap=bootstrap).json()
    assert none_short[0]["partitions"] == []
    at_min = kafkapy("topics", "describe", "t-life", "--at-min-isr-partitions", "--json", bootstrap=bootstrap).json()
    assert [p["partition"] for p in at_min[0]["partitions"]] == [0, 1, 2]  # ISR 1 = min.insync.replicas 1
    under_min = kafkapy("topics", "describe", "--under-min-isr-partitions", "--exclude-internal", "--json",
                        bootstrap=bootstrap).json()
    assert all(t["partitions"] == [] for t in under_min)

    r = kafkapy("topics", "alter", "t-life", "--config", "cleanup.policy=compact", "--delete-config",
                "retention.ms", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    configs = kafkapy("configs", "describe", "--topic", "t-life", "--json", bootstrap=bootstrap).json()
    dynamic = {c["name"]: c["value"] for c in configs if c["source"] == "DYNAMIC_TOPIC_CONFIG"}
    assert dynamic == {"cleanup.policy": "compact"}

    assert kafkapy("topics", "add-partitions", "t-life", "--partitions", "5", bootstrap=bootstrap).code == 0
    assert len(kafkapy("topics", "describe", "t-life", "--json", bootstrap=bootstrap).json()[0]["partitions"]) == 5
    shrink = kafkapy("topics", "add-partitions", "t-life", "--partitions", "2", bootstrap=bootstrap)
    assert shrink.code == 1
    assert "INVALID_PARTITIONS" in shrink.stderr

    assert kafkapy("topics", "delete", "t-life", bootstrap=bootstrap).code == 0
    deadline = time.monotonic() + 20
    while "t-life" in kafkapy("topics", "list", bootstrap=bootstrap).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    gone = kafkapy("topics", "delete", "t-life", bootstrap=bootstrap)
    assert gone.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION (error code 3)" in gone.stderr
    assert kafkapy("topics", "delete", "t-life", "--if-exists", bootstrap=bootstrap).code == 0


def test_errors_name_the_code_and_never_create_topics(bootstrap: str) -> None:
    r = kafkapy("topics", "describe", "no-such-topic", bootstrap=bootstrap)
    assert r.code == 1
    assert "no-such-topic: UNKNOWN_TOPIC_OR_PARTITION (error code 3)" in r.stderr
    assert "Traceback" not in r.stderr
    r = kafkapy("topics", "create", "zero", "--partitions", "0", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_PARTITIONS" in r.stderr
    r = kafkapy("topics", "create", "bad-config", "--config", "cleanup.policy=sometimes", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_CONFIG" in r.stderr
    r = kafkapy("topics", "alter", "no-such-topic", "--config", "retention.ms=1", bootstrap=bootstrap)
    assert r.code == 1
    names = [t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()]
    assert "no-such-topic" not in names
    assert "zero" not in names


def test_if_exists_acts_on_the_topics_that_exist(bootstrap: str) -> None:
    """kafka-topics.sh's `--if-exists` on describe, alter and add-partitions: a missing topic is
    skipped (exit 0, never created), the existing ones are acted on."""
    assert kafkapy("topics", "create", "t-there", "--partitions", "1", bootstrap=bootstrap).code == 0
    r = kafkapy("topics", "describe", "t-gone", "--if-exists", "--json", bootstrap=bootstrap)
    assert (r.code, r.json()) == (0, []), r.stderr
    r = kafkapy("topics", "describe", "t-gone", "t-there", "--if-exists", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert [t["topic"] for t in r.json()] == ["t-there"]
    r = kafkapy("topics", "alter", "t-gone", "t-there", "--if-exists", "--partitions", "2",
                "--config", "retention.ms=7000", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert [t["topic"] for t in r.json()] == ["t-there"]
    r = kafkapy("topics", "add-partitions", "t-gone", "t-there", "--if-exists", "--partitions", "3",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert kafkapy("topics", "alter", "t-gone", "--if-exists", "--partitions", "2", bootstrap=bootstrap).code == 0
    (there,) = kafkapy("topics", "describe", "t-there", "--json", bootstrap=bootstrap).json()
    assert (len(there["partitions"]), there["configs"]["retention.ms"]) == (3, "7000")
    names = [t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()]
    assert "t-gone" not in names
    r = kafkapy("topics", "alter", "t-gone", "--partitions", "2", bootstrap=bootstrap)
    assert r.code == 1  # without --if-exists a missing topic is still an error
    assert "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr


def test_a_topic_with_pattern_characters_is_a_regular_expression(bootstrap: str) -> None:
    """kafka-topics.sh's `--topic 'orders-.*'` on describe, alter and delete (matched against the
    whole name); a plain name stays a name, a bad pattern is a usage error."""
    for name in ("rx-a", "rx-b", "rx.c", "other"):
        assert kafkapy("topics", "create", name, "--partitions", "1", bootstrap=bootstrap).code == 0
    r = kafkapy("topics", "describe", "--topic", "rx-.*", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert [t["topic"] for t in r.json()] == ["rx-a", "rx-b"]
    r = kafkapy("topics", "describe", "rx.c", "--json", bootstrap=bootstrap)  # a name: '.' is literal
    assert [t["topic"] for t in r.json()] == ["rx.c"]
    r = kafkapy("topics", "alter", "rx-[ab]", "--config", "retention.ms=8000", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert [t["topic"] for t in r.json()] == ["rx-a", "rx-b"]
    r = kafkapy("topics", "describe", "rx-(a|b)", "--json", bootstrap=bootstrap)
    assert {t["topic"]: t["configs"].get("retention.ms") for t in r.json()} == {"rx-a": "8000", "rx-b": "8000"}

    r = kafkapy("topics", "delete", "nothing-.*", bootstrap=bootstrap)
    assert r.code == 1
    assert "no topic matches 'nothing-.*'" in r.stderr
    assert kafkapy("topics", "delete", "nothing-.*", "--if-exists", bootstrap=bootstrap).code == 0
    r = kafkapy("topics", "describe", "rx-[", bootstrap=bootstrap)
    assert r.code == 2
    assert "neither a topic name nor a regular expression" in r.stderr
    r = kafkapy("topics", "delete", "rx-.*", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert sorted(r.json(), key=lambda t: t["topic"]) == [{"topic": "rx-a", "deleted": True},
                                                          {"topic": "rx-b", "deleted": True}]
    names = {t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()}
    assert {"rx.c", "other"} <= names
    assert not {"rx-a", "rx-b"} & names


def test_usage_errors_exit_2(bootstrap: str) -> None:
    r = kafkapy("topics", "create", bootstrap=bootstrap)
    assert r.code == 2
    assert "name a topic" in r.stderr
    r = kafkapy("topics", "create", "x", "--partitions", "many", bootstrap=bootstrap)
    assert r.code == 2
    r = kafkapy("topics", "create", "x", "--config", "no-equals", bootstrap=bootstrap)
    assert r.code == 2
    assert "KEY=VALUE" in r.stderr


def test_replica_assignment_by_hand(bootstrap: str) -> None:
    """kafka-topics.sh's `--replica-assignment` (',' between partitions, ':' between replicas)."""
    def placement(topic: str) -> list[tuple[int, list[int], int]]:
        (described,) = kafkapy("topics", "describe", topic, "--json", bootstrap=bootstrap).json()
        return [(p["partition"], p["replicas"], p["leader"]) for p in described["partitions"]]

    r = kafkapy("topics", "create", "placed", "--replica-assignment", "1,1,1", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.json() == [{"topic": "placed", "created": True, "partitions": 3, "replication_factor": 1,
                         "topic_id": r.json()[0]["topic_id"]}]
    assert placement("placed") == [(0, [1], 1), (1, [1], 1), (2, [1], 1)]
    # growing: the list names every partition, only the new ones' entries are sent
    r = kafkapy("topics", "add-partitions", "placed", "--partitions", "4", "--replica-assignment", "1,1,1,1",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert placement("placed")[3] == (3, [1], 1)
    r = kafkapy("topics", "alter", "placed", "--partitions", "5", "--replica-assignment", "1,1,1,1,7",
                bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_REPLICA_ASSIGNMENT (error code 39)" in r.stderr
    assert len(placement("placed")) == 4
    # a broker that does not exist: the broker's error code and what to do
    r = kafkapy("topics", "create", "misplaced", "--replica-assignment", "2", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_REPLICA_ASSIGNMENT (error code 39)" in r.stderr
    assert "kafkapy cluster info" in r.stderr
    names = [t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()]
    assert "misplaced" not in names
    # malformed lists and flags that contradict it are usage errors, nothing sent
    for flags, message in [
        (["--replica-assignment", "1:x"], "'1:x' is not broker ids"),
        (["--replica-assignment", "1:1"], "names a broker twice"),
        (["--replica-assignment", "1:2,1"], "partition 1 has 1 replicas, partition 0 has 2"),
        (["--replica-assignment", "1", "--partitions", "1"], "replaces --partitions"),
    ]:
        r = kafkapy("topics", "create", "misplaced", *flags, bootstrap=bootstrap)
        assert r.code == 2, flags
        assert message in r.stderr, r.stderr
    r = kafkapy("topics", "add-partitions", "placed", "--partitions", "6", "--replica-assignment", "1,1",
                bootstrap=bootstrap)
    assert r.code == 2
    assert "lists 2 partitions, --partitions asks for 6" in r.stderr


def test_validate_only_changes_nothing(bootstrap: str) -> None:
    r = kafkapy("topics", "create", "checked", "--partitions", "2", "--validate-only", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.json()[0]["created"] is False
    assert r.json()[0]["partitions"] == 2
    assert "would create topic checked" in kafkapy("topics", "create", "checked", "--validate-only",
                                                   bootstrap=bootstrap).stdout
    names = [t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()]
    assert "checked" not in names
    bad = kafkapy("topics", "create", "checked", "--partitions", "0", "--validate-only", bootstrap=bootstrap)
    assert bad.code == 1
    assert "INVALID_PARTITIONS" in bad.stderr

    assert kafkapy("topics", "create", "kept-config", bootstrap=bootstrap).code == 0
    r = kafkapy("configs", "alter", "--topic", "kept-config", "--add-config", "retention.ms=5000", "--validate-only",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "validated configs of topic kept-config" in r.stdout
    described = kafkapy("configs", "describe", "--topic", "kept-config", "--json", bootstrap=bootstrap).json()
    assert [c for c in described if c["name"] == "retention.ms"] == []
    r = kafkapy("configs", "alter", "--topic", "kept-config", "--add-config", "cleanup.policy=sometimes",
                "--validate-only", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_CONFIG (error code 40)" in r.stderr


def test_unreachable_broker_is_one_clear_line_fast() -> None:
    """No broker, or a port that accepts but never answers: one line, exit 1, no hang (the
    client's connect and set-up timeouts are 5 s; the subprocess timeout only guards a hang)."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = kafkapy("topics", "list", env={"KAFKAPY_BOOTSTRAP_SERVERS": f"127.0.0.1:{port}"}, timeout=30)
    assert r.code == 1
    assert f"cannot connect to 127.0.0.1:{port}" in r.stderr
    assert "Traceback" not in r.stderr
    with socket.socket() as silent:  # accepts (the kernel's backlog) but never speaks Kafka
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        r = kafkapy("topics", "list", bootstrap=address, timeout=30)
    assert r.code == 1
    assert f"{address} does not answer as a Kafka broker" in r.stderr
    assert "security.protocol" in r.stderr


def test_broker_configs_per_broker_and_cluster_default(bootstrap: str) -> None:
    """Kafka's two dynamic levels: one broker (sent to it) and the cluster default ("")."""
    r = kafkapy("configs", "describe", "--broker", "1", "--all", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "num.partitions" in {c["name"] for c in r.json()}

    def dynamic(*entity: str) -> dict[str, tuple[str, str]]:
        docs = kafkapy("configs", "describe", *entity, "--json", bootstrap=bootstrap).json()
        return {c["name"]: (c["value"], c["source"]) for c in docs if c["source"].startswith("DYNAMIC")}

    r = kafkapy("configs", "alter", "--broker-defaults", "--add-config", "log.retention.ms=3600000",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert dynamic("--broker-defaults")["log.retention.ms"] == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    r = kafkapy("configs", "alter", "--broker", "1", "--add-config", "log.retention.ms=7200000",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert dynamic("--broker", "1")["log.retention.ms"] == ("7200000", "DYNAMIC_BROKER_CONFIG")
    r = kafkapy("configs", "alter", "--broker", "1", "--delete-config", "log.retention.ms", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert dynamic("--broker", "1")["log.retention.ms"] == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    kafkapy("configs", "alter", "--broker-defaults", "--delete-config", "log.retention.ms", bootstrap=bootstrap)

    refused = kafkapy("configs", "alter", "--broker", "1", "--add-config", "no.such.key=1", bootstrap=bootstrap)
    assert refused.code == 1
    # Kafka answers a broker config it cannot change INVALID_REQUEST (ConfigAdminManager)
    assert "no.such.key" in refused.stderr
    assert "INVALID_REQUEST (error code 42) - the broker refused the request as invalid" in refused.stderr
    other = kafkapy("configs", "alter", "--broker", "7", "--add-config", "log.retention.ms=1", bootstrap=bootstrap)
    assert other.code == 1
    assert "broker 7 is not in the cluster's metadata" in other.stderr
    r = kafkapy("configs", "describe", "--broker", "x", bootstrap=bootstrap)
    assert r.code == 2
    r = kafkapy("configs", "alter", "--topic", "x", bootstrap=bootstrap)
    assert r.code == 2
    r = kafkapy("configs", "describe", bootstrap=bootstrap)
    assert r.code == 2


def test_bootstrap_from_env_profile_and_a_list_with_a_dead_server(bootstrap: str, tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    r = kafkapy("topics", "list", "--json", bootstrap=f"{dead},{bootstrap}")  # the next server answers
    assert r.code == 0, r.stderr
    r = kafkapy("topics", "list", "--json", env={"KAFKAPY_BOOTSTRAP_SERVERS": bootstrap})
    assert r.code == 0, r.stderr
    profile = tmp_path / "client.properties"
    profile.write_text(f"bootstrap.servers={bootstrap}\n")
    r = kafkapy("topics", "list", "--json", env={"KAFKAPY_PROFILE": str(profile)})
    assert r.code == 0, r.stderr
    r = kafkapy("topics", "list", bootstrap=dead)
    assert r.code == 1


def test_describe_without_names_shows_each_topics_configs(bootstrap: str) -> None:
    r = kafkapy("topics", "create", "cfg-all", "--config", "retention.ms=4321", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    human = kafkapy("topics", "describe", bootstrap=bootstrap)
    assert human.code == 0, human.stderr
    header = next(line for line in human.stdout.splitlines() if line.startswith("Topic cfg-all "))
    assert header.endswith("configs retention.ms=4321")
    as_json = {t["topic"]: t for t in kafkapy("topics", "describe", "--json", bootstrap=bootstrap).json()}
    assert as_json["cfg-all"]["configs"]["retention.ms"] == "4321"


def test_a_dead_first_bootstrap_server_is_skipped_quietly_by_quorum_and_produce(bootstrap: str) -> None:
    """`cluster quorum` fails over like the other commands; librdkafka's connection failures to
    the dead server (`%3|...|FAIL|...`) are not printed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    r = kafkapy("cluster", "quorum", "--json", bootstrap=f"{dead},{bootstrap}")
    assert r.code == 0, r.stderr
    assert r.json()["leader_id"] == 1
    assert kafkapy("topics", "create", "quiet", bootstrap=bootstrap).code == 0
    r = kafkapy("produce", "quiet", stdin="a\nb\n", bootstrap=f"{dead},{bootstrap}")
    assert r.code == 0, r.stderr
    assert "%3|" not in r.stderr, r.stderr
    assert "FAIL" not in r.stderr, r.stderr
    r = kafkapy("consume", "quiet", "--from-beginning", "--exit-at-end", bootstrap=f"{dead},{bootstrap}")
    assert r.stdout.split() == ["a", "b"]
    assert "%3|" not in r.stderr, r.stderr
