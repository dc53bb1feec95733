"""Broker logger levels (BROKER_LOGGER) over Python's loggers: Kafka's level names both ways,
the refusals Kafka gives, all-or-nothing changes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kafkapy.broker.broker_loggers import (
    KAFKA_LEVELS,
    LoggerChange,
    LoggerError,
    alter_loggers,
    logger_levels,
)
from kafkapy.protocol.errors import ErrorCode

BROKER_LOGGER = "kafkapy.server.broker"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    """Loggers are process-wide: put back every level a test changed."""
    import kafkapy.server.broker  # noqa: F401  (the logger exists once its module is imported)

    names = [name for name, _ in logger_levels()]
    saved = {n: (logging.getLogger() if n == "root" else logging.getLogger(n)).level for n in names}
    yield
    for name, level in saved.items():
        (logging.getLogger() if name == "root" else logging.getLogger(name)).setLevel(level)


def _level(name: str) -> str:
    return dict(logger_levels([name]))[name]


def test_describe_lists_root_and_kafkapys_loggers_with_their_effective_level() -> None:
    levels = dict(logger_levels())
    assert "root" in levels
    assert BROKER_LOGGER in levels
    assert all(n == "root" or n.startswith("kafkapy") for n in levels)
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger(BROKER_LOGGER).setLevel(logging.NOTSET)
    assert _level(BROKER_LOGGER) == "WARN"  # inherited, in Kafka's name


@pytest.mark.parametrize("level", list(KAFKA_LEVELS))
def test_every_kafka_level_is_set_and_described_by_its_name(level: str) -> None:
    alter_loggers([LoggerChange(BROKER_LOGGER, SET, level.lower())])
    assert _level(BROKER_LOGGER) == level


def test_levels_take_effect_and_delete_follows_the_parent_again() -> None:
    logger = logging.getLogger(BROKER_LOGGER)
    logging.getLogger().setLevel(logging.INFO)
    alter_loggers([LoggerChange(BROKER_LOGGER, SET, "TRACE")])
    assert logger.isEnabledFor(logging.DEBUG)
    alter_loggers([LoggerChange(BROKER_LOGGER, SET, "OFF")])
    assert not logger.isEnabledFor(logging.CRITICAL)
    alter_loggers([LoggerChange(BROKER_LOGGER, DELETE, None)])
    assert logger.level == logging.NOTSET
    assert _level(BROKER_LOGGER) == "INFO"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (LoggerChange("kafka.server.ReplicaManager", SET, "DEBUG"), ErrorCode.INVALID_CONFIG),
        (LoggerChange("urllib3", SET, "DEBUG"), ErrorCode.INVALID_CONFIG),
        (LoggerChange(BROKER_LOGGER, SET, "LOUD"), ErrorCode.INVALID_CONFIG),
        (LoggerChange(BROKER_LOGGER, SET, None), ErrorCode.INVALID_CONFIG),
        (LoggerChange(BROKER_LOGGER, APPEND, "DEBUG"), ErrorCode.INVALID_REQUEST),
        (LoggerChange(BROKER_LOGGER, SUBTRACT, "DEBUG"), ErrorCode.INVALID_REQUEST),
        (LoggerChange("root", DELETE, None), ErrorCode.INVALID_REQUEST),
    ],
)
def test_refusals_change_nothing(change: LoggerChange, error: ErrorCode) -> None:
    before = dict(logger_levels())
    with pytest.raises(LoggerError) as info:
        alter_loggers([LoggerChange("root", SET, "ERROR"), change])
    assert info.value.error == error
    assert dict(logger_levels()) == before


def test_a_name_twice_and_validate_only() -> None:
    with pytest.raises(LoggerError) as info:
        alter_loggers([LoggerChange(BROKER_LOGGER, SET, "DEBUG"), LoggerChange(BROKER_LOGGER, DELETE, None)])
    assert info.value.error == ErrorCode.INVALID_REQUEST
    before = _level(BROKER_LOGGER)
    alter_loggers([LoggerChange(BROKER_LOGGER, SET, "FATAL" if before != "FATAL" else "INFO")], validate_only=True)
    assert _level(BROKER_LOGGER) == before
