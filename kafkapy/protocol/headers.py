"""Request and response headers: the fields every frame starts with, and which header version
an API version uses (v0 / v1 / v2 requests, v0 / v1 responses).

Why a module of its own: the generic codec and the Produce fast path (`produce_fast`) both build
`RequestHeader`s, and the fast path must not import the codec that dispatches to it.
"""

from __future__ import annotations

import dataclasses

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.messages import APIS
from kafkapy.protocol.schema import in_range

__all__ = ["RequestHeader", "request_header_version", "response_header_version"]


@dataclasses.dataclass(slots=True)
class RequestHeader:
    """Request header v0-v2 (v2 adds a tagged section; client_id stays a non-compact string)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    unknown_tagged_fields: dict[int, bytes] = dataclasses.field(default_factory=dict)


#: ControlledShutdown (key 7) v0 is the one request ever sent with header v0 (no client id).
_HEADER_V0 = frozenset({(7, 0)})


def request_header_version(api_key: int, api_version: int) -> int:
    """Header v2 for flexible versions, else v1 (v0 for ControlledShutdown v0 only).

    Unknown keys are read as v1. Flexible ranges are open-ended, so a client probing with an
    ApiVersions version newer than ours still gets its tagged header section read correctly.
    """
    if (api_key, api_version) in _HEADER_V0:
        return 0
    api = APIS.get(api_key)
    if api is not None and in_range(api_version, api.request_flexible):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header v1 for flexible versions, except ApiVersions which always uses v0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    api = APIS.get(api_key)
    return 1 if api is not None and in_range(api_version, api.response_flexible) else 0
