"""Error codes a client of an older request version does not know, and what Kafka sends instead.

Why one table instead of checks in each handler: the rules live in shared state machines (the
transaction coordinator fences with PRODUCER_FENCED whichever API asked), and a code newer
than the request version reaches the client as an error it cannot interpret - librdkafka
and kafka-python turn an unknown code into a fatal or generic error where the older code has
a defined recovery. Kafka downgrades the same codes in its request handlers; here every
response passes `downgrade_errors` before it is encoded, which costs one dict lookup for a
request at or above the newest gated version (the Produce and Fetch versions current clients
use) and a walk of the response's error fields only below it.

The table follows the "Version N adds ... error code" notes of Kafka's message definitions
(tests cross-check it against them); each entry's replacement is the code Kafka's handler
sends to the older version.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ErrorCode

__all__ = ["ERRORS_SINCE", "downgrade_errors", "older_codes"]

E = ErrorCode

#: api key -> {error code: (first version that may carry it, what older versions get)}
ERRORS_SINCE: dict[ApiKey, dict[ErrorCode, tuple[int, ErrorCode]]] = {
    # KIP-112: clients before these versions know a storage failure as "not the leader"
    ApiKey.PRODUCE: {E.KAFKA_STORAGE_ERROR: (4, E.NOT_LEADER_OR_FOLLOWER)},
    ApiKey.FETCH: {E.KAFKA_STORAGE_ERROR: (6, E.NOT_LEADER_OR_FOLLOWER)},
    ApiKey.LIST_OFFSETS: {E.OFFSET_NOT_AVAILABLE: (5, E.LEADER_NOT_AVAILABLE)},
    # KIP-588: a fenced producer was INVALID_PRODUCER_EPOCH before PRODUCER_FENCED existed
    ApiKey.INIT_PRODUCER_ID: {E.PRODUCER_FENCED: (4, E.INVALID_PRODUCER_EPOCH)},
    ApiKey.ADD_PARTITIONS_TO_TXN: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    ApiKey.ADD_OFFSETS_TO_TXN: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    ApiKey.END_TXN: {E.PRODUCER_FENCED: (2, E.INVALID_PRODUCER_EPOCH)},
    ApiKey.DELETE_TOPICS: {E.TOPIC_DELETION_DISABLED: (3, E.INVALID_REQUEST)},
    # KIP-848: a member epoch mismatch is a generation mismatch to a classic-protocol commit
    ApiKey.OFFSET_COMMIT: {E.STALE_MEMBER_EPOCH: (9, E.ILLEGAL_GENERATION)},
    ApiKey.ALTER_PARTITION: {
        E.INELIGIBLE_REPLICA: (2, E.OPERATION_NOT_ATTEMPTED),
        E.NEW_LEADER_ELECTED: (2, E.OPERATION_NOT_ATTEMPTED),
        E.UNKNOWN_TOPIC_ID: (2, E.UNKNOWN_TOPIC_OR_PARTITION),
    },
}

# api key -> the oldest version that needs no downgrade (one lookup on the common path)
_ALL_KNOWN_FROM: dict[int, int] = {
    int(api): max(since for since, _ in codes.values()) for api, codes in ERRORS_SINCE.items()
}


def older_codes(api_key: ApiKey, version: int) -> dict[int, ErrorCode]:
    """Code -> replacement for the codes `version` of `api_key` predates (often empty); for
    encoders that write error codes themselves (the zero-copy Fetch response)."""
    if version >= _ALL_KNOWN_FROM.get(api_key, 0):
        return {}
    return {
        int(code): older
        for code, (since, older) in ERRORS_SINCE[api_key].items()
        if version < since
    }


def downgrade_errors(api_key: int, version: int, response: Any) -> Any:
    """Replace, in place, every error code of `response` that `version` predates; returns it."""
    if version >= _ALL_KNOWN_FROM.get(api_key, 0):
        return response
    _walk(response, older_codes(ApiKey(api_key), version))
    return response


def _walk(message: Any, replace: dict[int, ErrorCode]) -> None:
    if not dataclasses.is_dataclass(message):
        return
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if isinstance(value, list):
            for item in value:
                _walk(item, replace)
        elif isinstance(value, int) and (f.name == "error_code" or f.name.endswith("_error_code")):
            older = replace.get(value)
            if older is not None:
                setattr(message, f.name, older)
        elif dataclasses.is_dataclass(value):
            _walk(value, replace)
