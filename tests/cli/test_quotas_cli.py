"""`kafkapy quotas describe|alter` against a real broker subprocess, as a user runs them
(kafka-configs.sh's users / clients entities, defaults, refusals with Kafka's code)."""

from __future__ import annotations

from tests.cli.conftest import kafkapy


def _quotas(bootstrap: str, *entity: str) -> list[dict[str, object]]:
    r = kafkapy("quotas", "describe", *entity, "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    found: list[dict[str, object]] = r.json()
    return found


def test_alter_describe_and_delete(bootstrap: str) -> None:
    r = kafkapy("quotas", "alter", "--client-id", "app", "--add-config",
                "producer_byte_rate=1048576,consumer_byte_rate=2097152", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "altered quotas of client-id=app" in r.stdout
    r = kafkapy("quotas", "alter", "--user", "alice", "--client-defaults",
                "--add-config", "request_percentage=12.5", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("quotas", "alter", "--user-defaults", "--add-config", "controller_mutation_rate=5",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr

    assert _quotas(bootstrap, "--client-id", "app") == [
        {"entity": {"client-id": "app"}, "quotas": {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0}}
    ]
    everything = _quotas(bootstrap)
    assert {"entity": {"user": "alice", "client-id": None}, "quotas": {"request_percentage": 12.5}} in everything
    assert {"entity": {"user": None}, "quotas": {"controller_mutation_rate": 5.0}} in everything
    # strict by default: alice's entity is user + client-id, not the user alone
    assert _quotas(bootstrap, "--user", "alice") == []
    assert len(_quotas(bootstrap, "--user", "alice", "--match-all")) == 1

    table = kafkapy("quotas", "describe", bootstrap=bootstrap)
    assert table.code == 0, table.stderr
    assert any(line.split()[:3] == ["client-id=app", "consumer_byte_rate", "2097152"]
               for line in table.stdout.splitlines())
    assert "user=alice, client-id=<default>" in table.stdout

    r = kafkapy("quotas", "alter", "--client-id", "app", "--delete-config", "consumer_byte_rate", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert _quotas(bootstrap, "--client-id", "app")[0]["quotas"] == {"producer_byte_rate": 1048576.0}


def test_validate_only_stores_nothing(bootstrap: str) -> None:
    r = kafkapy("quotas", "alter", "--client-id", "checked", "--add-config", "producer_byte_rate=100",
                "--validate-only", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "nothing stored" in r.stdout
    assert _quotas(bootstrap, "--client-id", "checked") == []


def test_refusals_name_kafkas_code(bootstrap: str) -> None:
    r = kafkapy("quotas", "alter", "--client-id", "x", "--add-config", "producer_byte_rate=-5", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_REQUEST" in r.stderr
    assert "greater than 0" in r.stderr
    r = kafkapy("quotas", "alter", "--client-id", "x", "--add-config", "producer_bytes_rate=5", bootstrap=bootstrap)
    assert r.code == 1
    assert "Invalid configuration key producer_bytes_rate" in r.stderr


def test_usage_errors() -> None:
    # checked before any broker is contacted
    assert kafkapy("quotas", "alter", "--add-config", "producer_byte_rate=1").code == 2
    assert kafkapy("quotas", "alter", "--user", "a", "--user-defaults", "--add-config", "producer_byte_rate=1").code == 2
    assert kafkapy("quotas", "alter", "--client-id", "a").code == 2
    r = kafkapy("quotas", "alter", "--client-id", "a", "--add-config", "producer_byte_rate=fast")
    assert r.code == 2
    assert "needs a number" in r.stderr
