"""API and error names in the test fault controls: a test may spell them as Kafka's protocol
guide does, and a mistyped name fails at once instead of never matching a request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker.faults import FaultInjector
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.testing.faults import NamedFaults, api_key_of, error_code_of


@pytest.mark.parametrize("name", ["Produce", "produce", "PRODUCE", ApiKey.PRODUCE, 0])
def test_produce_by_any_spelling(name: str | int) -> None:
    assert api_key_of(name) == ApiKey.PRODUCE


@pytest.mark.parametrize("name", ["OffsetCommit", "offset_commit", "OFFSET_COMMIT", "offsetcommit"])
def test_camel_case_api_names_as_kafka_spells_them(name: str) -> None:
    assert api_key_of(name) == ApiKey.OFFSET_COMMIT


@given(st.sampled_from(list(ApiKey)))
def test_every_api_key_by_its_kafka_name(key: ApiKey) -> None:
    camel = "".join(part.capitalize() for part in key.name.split("_"))
    assert api_key_of(camel) == key


def test_unknown_api_name_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Kafka API 'Produse'"):
        api_key_of("Produse")


def test_error_names() -> None:
    assert error_code_of("NOT_LEADER_OR_FOLLOWER") == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert error_code_of("not_leader_or_follower") == 6
    assert error_code_of(ErrorCode.NOT_LEADER_OR_FOLLOWER) == 6
    with pytest.raises(ValueError, match="unknown Kafka error"):
        error_code_of("NOT_A_LEADER")


def test_named_faults_install_rules_on_the_injector() -> None:
    injector = FaultInjector()
    faults = NamedFaults(injector)
    faults.fail("Produce", 6, count=2)
    faults.drop("Fetch")
    faults.delay("metadata", 50)
    rules = injector.rules()
    assert [(r.api_key, r.action.kind, r.remaining) for r in rules] == [
        (ApiKey.PRODUCE, "fail", 2), (ApiKey.FETCH, "drop", 1), (ApiKey.METADATA, "delay", 1)
    ]
    assert rules[0].action.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert faults.requests("Produce") == []
    faults.clear()
    assert injector.rules() == []
