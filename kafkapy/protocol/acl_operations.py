"""Kafka's ACL operations and the bit fields of authorized operations (KIP-430).

Why here: Metadata, DescribeCluster, DescribeTopicPartitions and DescribeGroups all report
"authorized operations" as a bit field (bit n set = operation n allowed). A Kafka without an
authorizer reports every operation the resource type supports (these constants); with one, the
operations the principal may do (`StandardAuthorizer.authorized_operations_bits`). A client that
did not ask gets the "not requested" sentinel, INT32_MIN.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "CLUSTER_OPERATIONS",
    "GROUP_OPERATIONS",
    "TOPIC_OPERATIONS",
    "AclOperation",
    "operations_bits",
]


class AclOperation(enum.IntEnum):
    """Kafka's AclOperation codes (the bit positions of the field)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


def operations_bits(operations: Iterable[AclOperation]) -> int:
    bits = 0
    for op in operations:
        bits |= 1 << op
    return bits


_O = AclOperation
#: What each resource type supports (Kafka's AclEntry.supportedOperations), as bit fields.
TOPIC_OPERATIONS = operations_bits([
    _O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
    _O.ALTER_CONFIGS,
])
CLUSTER_OPERATIONS = operations_bits([
    _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
    _O.ALTER, _O.DESCRIBE,
])
GROUP_OPERATIONS = operations_bits([_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS])
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
