"""Shared CLI settings: where the bootstrap servers come from, durations and date-times."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click
import pytest

from kafkapy.cli.common import ClientSettings, CliError, parse_datetime_ms, parse_duration_ms
from kafkapy.protocol import ErrorCode


def test_bootstrap_precedence(tmp_path: Path) -> None:
    profile = tmp_path / "profile.properties"
    profile.write_text("bootstrap.servers=profile:1\nsecurity.protocol=SSL\n")
    command = tmp_path / "client.properties"
    command.write_text("bootstrap.servers=command:2\nsasl.mechanism=PLAIN\n")
    env = {"KAFKAPY_PROFILE": str(profile)}
    assert ClientSettings.resolve(None, None, False, env).bootstrap == "profile:1"
    s = ClientSettings.resolve(None, command, False, env)
    assert s.bootstrap == "command:2"
    assert s.properties == {"security.protocol": "SSL", "sasl.mechanism": "PLAIN"}
    env["KAFKAPY_BOOTSTRAP_SERVERS"] = "env:3"
    assert ClientSettings.resolve(None, command, False, env).bootstrap == "env:3"
    assert ClientSettings.resolve("flag:4", command, True, env).bootstrap == "flag:4"
    assert ClientSettings.resolve(None, None, False, {"HOME": str(tmp_path)}).bootstrap == "127.0.0.1:9092"


def test_librdkafka_config_leaves_out_java_only_keys() -> None:
    s = ClientSettings("a:1,b:2", {"sasl.jaas.config": "x", "ssl.truststore.location": "t",
                                   "sasl.mechanism": "PLAIN"})
    assert s.librdkafka() == {"bootstrap.servers": "a:1,b:2", "sasl.mechanism": "PLAIN"}
    assert s.servers == ["a:1", "b:2"]


@pytest.mark.parametrize(("text", "ms"), [
    ("10m", 600_000), ("90s", 90_000), ("2h", 7_200_000), ("1d", 86_400_000), ("250ms", 250),
    ("PT10M", 600_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500), ("-PT1M", -60_000),
])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["", "10", "ten minutes", "P", "PT"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(click.BadParameter):
        parse_duration_ms(text)


def test_datetimes() -> None:
    assert parse_datetime_ms("2024-05-01T12:00:00Z") == int(datetime(2024, 5, 1, 12, tzinfo=UTC).timestamp() * 1000)
    assert parse_datetime_ms("2024-05-01T14:00:00+02:00") == parse_datetime_ms("2024-05-01T12:00:00Z")
    assert parse_datetime_ms("1714564800000") == 1714564800000
    with pytest.raises(click.BadParameter):
        parse_datetime_ms("yesterday")


def test_error_names_the_kafka_code_and_what_to_do() -> None:
    e = CliError("topic nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert str(e) == ("topic nope: UNKNOWN_TOPIC_OR_PARTITION (error code 3) - "
                      "check the name with `kafkapy topics list`")
