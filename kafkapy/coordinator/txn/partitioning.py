"""Which `__transaction_state` (or `__consumer_offsets`) partition owns a key.

Why Java's `String.hashCode`: clients and other brokers compute the coordinator with Kafka's
formula, `abs(hashCode(key)) % partitions`, and a kafkapy cluster must agree with itself across
restarts whatever the Python hash seed; using Kafka's exact function also keeps
`__transaction_state` layouts comparable with a Kafka cluster's.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_OFFSETS_TOPIC_PARTITIONS",
    "DEFAULT_TRANSACTION_STATE_PARTITIONS",
    "OFFSETS_TOPIC",
    "java_string_hash",
    "partition_for",
]

#: the group coordinator's topic, where a transaction's offset commits go
OFFSETS_TOPIC = "__consumer_offsets"
#: `transaction.state.log.num.partitions` default.
DEFAULT_TRANSACTION_STATE_PARTITIONS = 50
#: `offsets.topic.num.partitions` default.
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50

_MASK = 0xFFFFFFFF
_INT_MIN = -(2**31)


def java_string_hash(value: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, int32 arithmetic."""
    data = value.encode("utf-16-be", errors="surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int = DEFAULT_TRANSACTION_STATE_PARTITIONS) -> int:
    """`Utils.abs(key.hashCode()) % num_partitions` (Kafka's abs maps int32 min to 0)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(key)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
