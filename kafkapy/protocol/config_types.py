"""Config vocabulary of the config APIs (DescribeConfigs, IncrementalAlterConfigs).

Why here: the numbers are part of the wire protocol, and every layer that owns a config table
(storage for topics, the group coordinator for groups, the server for brokers) describes its
keys with them, so they live in the lowest layer.
"""

from __future__ import annotations

import enum

__all__ = ["ConfigResourceType", "ConfigSource", "ConfigType"]


class ConfigType(enum.IntEnum):
    """Config value types, numbered as DescribeConfigs v3+ reports them."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a value came from, numbered as DescribeConfigs v1+ reports it (KIP-848 group
    configs are DYNAMIC_GROUP_CONFIG, 8)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


class ConfigResourceType(enum.IntEnum):
    """ConfigResource types as the config APIs number them."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32
