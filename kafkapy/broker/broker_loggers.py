"""Broker logger levels: Kafka's BROKER_LOGGER config resource (type 8) over Python's loggers.

Why: `kafka-configs --entity-type broker-loggers`, `kafkapy configs --broker-logger` and the
admin clients' IncrementalAlterConfigs change one broker's log levels at run time, to debug a
problem without a restart. Kafka does it for its log4j loggers; here the loggers are kafkapy's
Python loggers (`kafkapy`, `kafkapy.server.broker`, ..., named by module) and `root`.

Rules, as Kafka's:
- DescribeConfigs lists `root` and every kafkapy logger with its effective level
  (DYNAMIC_BROKER_LOGGER_CONFIG), in Kafka's level names.
- IncrementalAlterConfigs: SET a level (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL; any
  case) or DELETE it (the logger follows its parent again). An unknown logger or level is
  INVALID_CONFIG; APPEND / SUBTRACT, deleting `root`'s level or a name twice is
  INVALID_REQUEST. Every change of a request is checked before any is made.
- Per node and not persisted: a restart goes back to `--log-level`; in a cluster the request is
  answered by the broker it names, never forwarded to the controller.

Level mapping: WARN is Python's WARNING and FATAL its CRITICAL; TRACE is level 5 and ALL level 1
(below DEBUG, so both show everything kafkapy logs); OFF is above CRITICAL.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.protocol.errors import ErrorCode

__all__ = ["KAFKA_LEVELS", "LoggerChange", "LoggerError", "alter_loggers", "logger_levels"]

ROOT = "root"
PREFIX = "kafkapy"
SET, DELETE = 0, 1

#: Kafka's level names -> Python levels
KAFKA_LEVELS = {
    "OFF": logging.CRITICAL + 10,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
    "ALL": 1,
}
_NAMES_DOWN = sorted(KAFKA_LEVELS.items(), key=lambda item: -item[1])


@dataclass(frozen=True, slots=True)
class LoggerChange:
    """One operation of an IncrementalAlterConfigs on BROKER_LOGGER (`op`: 0 SET ... 3 SUBTRACT)."""

    name: str
    op: int
    value: str | None


class LoggerError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _kafka_level(level: int) -> str:
    """A Python level in Kafka's name: the highest Kafka level at or below it."""
    for name, value in _NAMES_DOWN:
        if level >= value:
            return name
    return "ALL"


def _known(name: str) -> bool:
    if name == ROOT:
        return True
    return (name == PREFIX or name.startswith(PREFIX + ".")) and (
        name in logging.root.manager.loggerDict
    )


def logger_levels(names: Sequence[str] | None = None) -> list[tuple[str, str]]:
    """(logger, Kafka level) of `root` and every kafkapy logger (only `names`, when given)."""
    ours = sorted(
        n
        for n, obj in logging.root.manager.loggerDict.items()
        if isinstance(obj, logging.Logger) and (n == PREFIX or n.startswith(PREFIX + "."))
    )
    loggers = [ROOT, *ours]
    out: list[tuple[str, str]] = []
    for name in loggers:
        if names is not None and name not in names:
            continue
        logger = logging.getLogger() if name == ROOT else logging.getLogger(name)
        out.append((name, _kafka_level(logger.getEffectiveLevel())))
    return out


def _check(change: LoggerChange) -> None:
    if change.op not in (SET, DELETE):
        raise LoggerError(
            ErrorCode.INVALID_REQUEST,
            f"operation {change.op} is not allowed for the BROKER_LOGGER resource",
        )
    if not _known(change.name):
        raise LoggerError(ErrorCode.INVALID_CONFIG, f"Logger {change.name} does not exist!")
    if change.op == DELETE:
        if change.name == ROOT:
            raise LoggerError(
                ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"
            )
        return
    level = (change.value or "").strip().upper()
    if level not in KAFKA_LEVELS:
        raise LoggerError(
            ErrorCode.INVALID_CONFIG,
            f"Cannot set the log level of {change.name} to {change.value} as it is not a "
            f"supported log level. Valid log levels are {', '.join(KAFKA_LEVELS)}",
        )


def alter_loggers(changes: Sequence[LoggerChange], *, validate_only: bool = False) -> None:
    """Apply every change, or none: raises LoggerError for the first that cannot be made."""
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise LoggerError(ErrorCode.INVALID_REQUEST, "Duplicate config name")
    for change in changes:
        _check(change)
    if validate_only:
        return
    for change in changes:
        logger = logging.getLogger() if change.name == ROOT else logging.getLogger(change.name)
        if change.op == DELETE:
            logger.setLevel(logging.NOTSET)
        else:
            logger.setLevel(KAFKA_LEVELS[(change.value or "").strip().upper()])
