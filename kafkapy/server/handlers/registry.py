"""The typed handler registry: one decorator places an API handler and its version range.

Why a registry: ApiVersions must advertise exactly what the broker answers, and a range declared
next to the handler cannot drift from it (franz-go's kfake does the same with `regKey`). The
advertised range is the handler's range clamped to what the codec speaks (`SUPPORTED_VERSIONS`).

Handler shape::

    @handler(ApiKey.METADATA, min_version=0, max_version=12)
    async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse: ...

Returning None sends no response (Produce with acks=0). A handler may return a `RawResponse`
(pre-encoded body segments, used by the zero-copy Fetch path). `error_response(req, version,
code)` builds the reply the connection sends when the handler raised; without it the registry
sets a top-level `error_code` if the response has one, else the connection is closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.context import RequestContext

__all__ = ["REGISTRY", "HandlerSpec", "advertised_versions", "handler", "lookup"]

HandlerFunc = Callable[[RequestContext, Any], Awaitable[Any]]
ErrorResponseFunc = Callable[[Any, int, ErrorCode], Any]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    api_key: ApiKey
    min_version: int
    max_version: int
    func: HandlerFunc
    error_response: ErrorResponseFunc | None
    fallback: bool = False

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[ApiKey, HandlerSpec] = {}


def handler(
    api_key: ApiKey,
    *,
    min_version: int,
    max_version: int,
    error_response: ErrorResponseFunc | None = None,
    fallback: bool = False,
) -> Callable[[F], F]:
    """Register `func` as the handler of `api_key` for [min_version, max_version].

    The range is clamped to the codec's; a range that does not overlap it is a programming error.
    A `fallback` handler (a minimal stand-in until a fuller one exists) gives way to a regular
    registration of the same key, whichever module loads first; two regular ones are an error.
    """

    def register(func: F) -> F:
        codec = SUPPORTED_VERSIONS.get(api_key)
        if codec is None:
            raise ValueError(f"{api_key.name}: the codec does not speak this API")
        low, high = max(min_version, codec[0]), min(max_version, codec[1])
        if low > high:
            raise ValueError(f"{api_key.name}: v{min_version}-{max_version} outside codec {codec}")
        existing = REGISTRY.get(api_key)
        if existing is not None and existing.func is not func:
            if fallback:
                return func  # a regular handler already serves this key
            if not existing.fallback:
                raise ValueError(f"{api_key.name}: handler registered twice")
        REGISTRY[api_key] = HandlerSpec(api_key, low, high, func, error_response, fallback)
        return func

    return register


def lookup(api_key: int) -> HandlerSpec | None:
    try:
        return REGISTRY.get(ApiKey(api_key))
    except ValueError:
        return None


def advertised_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered API, sorted by key (what ApiVersions lists)."""
    return sorted((int(s.api_key), s.min_version, s.max_version) for s in REGISTRY.values())
