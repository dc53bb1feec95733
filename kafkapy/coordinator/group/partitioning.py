"""Which `__consumer_offsets` partition owns a group: Kafka's `abs(hashCode(group)) % n`.

Why a module of its own: the broker's group driver places groups (and names the topic) at start,
long before any group record is read or written; this keeps that from building the record and
state classes.
"""

from __future__ import annotations

import functools

__all__ = ["CONSUMER_OFFSETS_TOPIC", "java_string_hash", "offsets_partition_for"]

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"


@functools.lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's `String.hashCode()` (over UTF-16 code units), so partitions match Kafka's.

    Cached: every Heartbeat, OffsetCommit and transactional request hashes its group or
    transactional id to find its coordinator, and a broker sees few distinct ids."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition owning a group: Kafka's `Utils.abs(hash) % n`."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
