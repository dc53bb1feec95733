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

Two registries: `REGISTRY` (`@handler`) serves the broker listeners; `CONTROLLER_REGISTRY`
(`@controller_handler`) serves the controller listener (`controller.listener.names`) in cluster
mode - Raft's Vote/BeginQuorumEpoch/Fetch and the broker-to-controller RPCs. Why apart: Kafka
answers different APIs on the two listener kinds, and a client that reached the controller port
by mistake must not see produce/fetch advertised there. Each registry answers ApiVersions with
its own list (the controller one registers its ApiVersions handler, ApiVersions v0-4, here below).

Each registry fills as its handler modules are imported: `lookup` imports the module the handler
table (`kafkapy.broker.handlers`) names for an API on its first request, and registering refuses
a handler the table does not place there with that range.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers import (
    BROKER_HANDLERS,
    CONTROLLER_HANDLERS,
    HandlerEntry,
    import_handler_module,
)
from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsResponse

__all__ = [
    "CONTROLLER_REGISTRY",
    "REGISTRY",
    "HandlerSpec",
    "advertised_versions",
    "controller_api_versions_body",
    "controller_handler",
    "handler",
    "lookup",
]

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

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, HandlerSpec] = {}
CONTROLLER_REGISTRY: dict[int, HandlerSpec] = {}


def handler(
    api_key: ApiKey,
    *,
    min_version: int,
    max_version: int,
    error_response: ErrorResponseFunc | None = None,
) -> Callable[[F], F]:
    """Register `func` as the handler of `api_key` for [min_version, max_version].

    The range is clamped to the codec's; a range that does not overlap it, a second handler for
    the same key, or a module and clamped range other than `BROKER_HANDLERS` lists (what
    ApiVersions advertises) is a programming error.
    """
    return _registrar(REGISTRY, BROKER_HANDLERS, api_key, min_version, max_version, error_response)


def controller_handler(
    api_key: ApiKey,
    *,
    min_version: int,
    max_version: int,
    error_response: ErrorResponseFunc | None = None,
) -> Callable[[F], F]:
    """`handler` for the controller listener: same rules, registered in `CONTROLLER_REGISTRY`."""
    return _registrar(CONTROLLER_REGISTRY, CONTROLLER_HANDLERS, api_key, min_version, max_version, error_response)


def _registrar(
    registry: dict[int, HandlerSpec],
    table: dict[int, HandlerEntry],
    api_key: ApiKey,
    min_version: int,
    max_version: int,
    error_response: ErrorResponseFunc | None,
) -> Callable[[F], F]:
    def register(func: F) -> F:
        codec = SUPPORTED_VERSIONS.get(api_key)
        if codec is None:
            raise ValueError(f"{api_key.name}: the codec does not speak this API")
        low, high = max(min_version, codec[0]), min(max_version, codec[1])
        if low > high:
            raise ValueError(f"{api_key.name}: v{min_version}-{max_version} outside codec {codec}")
        existing = registry.get(api_key)
        if existing is not None and existing.func is not func:
            raise ValueError(f"{api_key.name}: handler registered twice")
        entry = table.get(api_key)
        served = (func.__module__.rpartition(".")[2], low, high)
        if entry is None or tuple(entry) != served:
            raise ValueError(
                f"{api_key.name}: {served} is not what the handler table in kafkapy.broker.handlers says ({entry})"
            )
        registry[api_key] = HandlerSpec(api_key, low, high, func, error_response)
        return func

    return register


def lookup(api_key: int, *, controller: bool = False) -> HandlerSpec | None:
    """The handler of `api_key` on a broker listener, or on the controller listener; the first
    lookup of an API imports its handler module (ApiKey is an IntEnum: an int key finds it)."""
    registry = CONTROLLER_REGISTRY if controller else REGISTRY
    spec = registry.get(api_key)
    if spec is not None:
        return spec
    entry = (CONTROLLER_HANDLERS if controller else BROKER_HANDLERS).get(api_key)
    if entry is None:
        return None
    import_handler_module(entry.module)
    spec = registry.get(api_key)
    if spec is None:
        raise RuntimeError(f"kafkapy.broker.handlers.{entry.module} registered no handler for API key {api_key}")
    return spec


def advertised_versions(*, controller: bool = False) -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every API in the handler table, sorted by key (what ApiVersions
    lists), without importing a handler module."""
    table = CONTROLLER_HANDLERS if controller else BROKER_HANDLERS
    return sorted((int(k), e.min_version, e.max_version) for k, e in table.items())


def controller_api_versions_body(error_code: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    """ApiVersions as the controller listener answers it: only the controller registry's APIs."""
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in advertised_versions(controller=True)
        ],
    )
