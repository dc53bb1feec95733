"""`kafkapy acls create|list|delete` against a real `kafkapy serve` with StandardAuthorizer.

The CLI connects over plaintext as `User:ANONYMOUS`, the broker's super user here, as an admin
holding a super user's credentials would.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkapy.broker.config import STANDARD_AUTHORIZER
from tests.cli.conftest import Result, broker, kafkapy

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def secured() -> Iterator[str]:
    with broker(f"authorizer.class.name={STANDARD_AUTHORIZER}", "super.users=User:ANONYMOUS") as address:
        yield address


def rows(result: Result) -> set[tuple[str, ...]]:
    assert result.code == 0, result.stderr
    return {
        (r["resource_type"], r["name"], r["pattern_type"], r["principal"], r["host"], r["operation"],
         r["permission"])
        for r in result.json()
    }


def test_create_list_and_delete_as_kafka_acls_does(secured: str) -> None:
    r = kafkapy("acls", "create", "--topic", "orders", "--topic", "pay", "--allow-principal", "User:alice",
                "--operation", "Read", "--operation", "describe", bootstrap=secured)
    assert r.code == 0, r.stderr
    assert r.stdout.strip() == "created 4 ACLs"
    r = kafkapy("acls", "create", "--group", "app-", "--resource-pattern-type", "prefixed",
                "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", bootstrap=secured)
    assert r.code == 0, r.stderr
    everything = rows(kafkapy("acls", "list", "--json", bootstrap=secured))
    assert everything == {
        ("TOPIC", t, "LITERAL", "User:alice", "*", op, "ALLOW")
        for t in ("orders", "pay") for op in ("READ", "DESCRIBE")
    } | {("GROUP", "app-", "PREFIXED", "User:mallory", "10.0.0.9", "ALL", "DENY")}
    # MATCH lists what applies to a resource: the prefix applies to group app-1
    matched = rows(kafkapy("acls", "list", "--group", "app-1", "--resource-pattern-type", "match", "--json",
                           bootstrap=secured))
    assert matched == {("GROUP", "app-", "PREFIXED", "User:mallory", "10.0.0.9", "ALL", "DENY")}
    table = kafkapy("acls", "list", "--topic", "orders", bootstrap=secured)
    assert table.code == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split() == ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    assert sorted(line.split() for line in lines) == [
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
    ]
    removed = rows(kafkapy("acls", "delete", "--topic", "orders", "--allow-principal", "User:alice",
                           "--operation", "READ", "--json", bootstrap=secured))
    assert removed == {("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")}
    removed = rows(kafkapy("acls", "delete", "--topic", "pay", "--group", "app-", "--resource-pattern-type",
                           "any", "--json", bootstrap=secured))
    assert {(r[0], r[1]) for r in removed} == {("TOPIC", "pay"), ("GROUP", "app-")}
    assert len(removed) == 3
    left = rows(kafkapy("acls", "list", "--json", bootstrap=secured))
    assert left == {("TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW")}


def test_refusals_are_exit_1_with_kafkas_code_and_bad_flags_exit_2(secured: str) -> None:
    r = kafkapy("acls", "create", "--cluster", "--allow-principal", "User:ops", "--operation", "Read",
                bootstrap=secured)
    assert r.code == 2
    assert "CLUSTER only supports operations" in r.stderr
    # kafka-acls.sh's spellings (ClusterAction, IdempotentWrite) and ours (CLUSTER_ACTION) name one
    r = kafkapy("acls", "create", "--cluster", "--allow-principal", "User:ops", "--operation", "ClusterAction",
                "--operation", "IDEMPOTENT_WRITE", "--json", bootstrap=secured)
    assert {(row[0], row[5]) for row in rows(r)} == {("CLUSTER", "CLUSTER_ACTION"), ("CLUSTER", "IDEMPOTENT_WRITE")}
    r = kafkapy("acls", "create", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly",
                bootstrap=secured)
    assert r.code == 2
    assert "ClusterAction" in r.stderr
    r = kafkapy("acls", "create", "--topic", "t", "--allow-principal", "alice", bootstrap=secured)
    assert r.code == 2
    assert "TYPE:NAME" in r.stderr
    r = kafkapy("acls", "create", "--topic", "t", bootstrap=secured)
    assert r.code == 2
    r = kafkapy("acls", "create", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type",
                "match", bootstrap=secured)
    assert r.code == 2
    r = kafkapy("acls", "delete", bootstrap=secured)
    assert r.code == 2


def test_without_an_authorizer_the_broker_says_security_disabled(bootstrap: str) -> None:
    r = kafkapy("acls", "list", bootstrap=bootstrap)
    assert r.code == 1
    assert "SECURITY_DISABLED" in r.stderr
    assert "set authorizer.class.name" in r.stderr  # what to do about it
    assert "Traceback" not in r.stderr


def test_producer_and_consumer_shortcuts_add_what_kafka_acls_adds(secured: str) -> None:
    r = kafkapy("acls", "create", "--producer", "--consumer", "--topic", "events", "--group", "etl",
                "--transactional-id", "etl-tx", "--allow-principal", "User:etl", "--json", bootstrap=secured)
    created = rows(r)
    assert created == {
        ("TOPIC", "events", "LITERAL", "User:etl", "*", op, "ALLOW")
        for op in ("WRITE", "DESCRIBE", "CREATE", "READ")
    } | {("TRANSACTIONAL_ID", "etl-tx", "LITERAL", "User:etl", "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")} | {
        ("GROUP", "etl", "LITERAL", "User:etl", "*", "READ", "ALLOW")
    }
    assert rows(kafkapy("acls", "list", "--principal", "User:etl", "--json", bootstrap=secured)) == created
    r = kafkapy("acls", "create", "--consumer", "--topic", "events", "--allow-principal", "User:etl",
                bootstrap=secured)
    assert r.code == 2
    assert "--consumer needs --topic and --group" in r.stderr
    removed = rows(kafkapy("acls", "delete", "--topic", "events", "--group", "etl", "--transactional-id",
                           "etl-tx", "--json", bootstrap=secured))
    assert removed == created
