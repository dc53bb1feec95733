"""ApiVersions (key 18): v0-4.

Behaviour: lists every API this broker has a handler for, with the handler's version range
clamped to the codec's (see registry). A request in a version we do not speak is answered - not
dropped - with UNSUPPORTED_VERSION and a v0 body listing our versions, so a newer client
downgrades instead of disconnecting (what Kafka does).

Not yet: supported/finalized feature flags (no client we target needs them).
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey, RequestHeader, encode_response
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkapy.protocol.messages.api_versions import ApiVersionsResponse_ApiVersion as ApiVersion
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import advertised_versions, handler

__all__ = ["handle_api_versions", "unsupported_version_response"]


def _api_keys() -> list[ApiVersion]:
    return [
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, lo, hi in advertised_versions()
    ]


@handler(ApiKey.API_VERSIONS, min_version=0, max_version=4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys())


def unsupported_version_response(header: RequestHeader) -> bytes:
    """The encoded (unprefixed) v0 UNSUPPORTED_VERSION answer to an ApiVersions we cannot speak."""
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())
    return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
