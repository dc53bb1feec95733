"""ApiVersions (key 18): v0-4.

Behaviour: lists every API this broker has a handler for (on a controller listener: the
controller registry's), with the handler's version range clamped to the codec's (see registry). A request in a version we do not speak is answered - not
dropped - with UNSUPPORTED_VERSION and a v0 body listing our versions, so a newer client
downgrades instead of disconnecting (what Kafka does).

Feature flags (v3+, KIP-584): see handlers/shared/features.py - what this kafkapy supports,
the image's finalized levels, and the image's metadata offset as FinalizedFeaturesEpoch.

Not yet: UpdateFeatures (key 57) - the levels are fixed at what a new cluster finalizes.
"""

from __future__ import annotations

from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import (
    advertised_versions,
    controller_api_versions_body,
    controller_handler,
    handler,
)
from kafkapy.broker.handlers.shared.features import add_features
from kafkapy.protocol import ApiKey, RequestHeader, encode_response
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkapy.protocol.messages.api_versions import ApiVersionsResponse_ApiVersion as ApiVersion

__all__ = [
    "handle_api_versions",
    "handle_controller_api_versions",
    "unsupported_version_response",
]


def _api_keys() -> list[ApiVersion]:
    return [
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, lo, hi in advertised_versions()
    ]


@handler(ApiKey.API_VERSIONS, min_version=0, max_version=4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys())
    add_features(response, ctx.metadata.image, ctx.api_version)
    return response


@controller_handler(ApiKey.API_VERSIONS, min_version=0, max_version=4)
async def handle_controller_api_versions(
    ctx: RequestContext, req: ApiVersionsRequest
) -> ApiVersionsResponse:
    """Brokers, Raft peers and admin tools (`--bootstrap-controller`) ask the controller
    listener which versions and features it has (features as on the broker listeners)."""
    response = controller_api_versions_body()
    add_features(response, ctx.metadata.image, ctx.api_version)
    return response


def unsupported_version_response(header: RequestHeader) -> bytes:
    """The encoded (unprefixed) v0 UNSUPPORTED_VERSION answer to an ApiVersions we cannot speak."""
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())
    return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
