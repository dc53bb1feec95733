"""ApiVersions (key 18): v0-4.

Behaviour: lists every API this broker has a handler for, with the handler's version range
clamped to the codec's (see registry). A request in a version we do not speak is answered - not
dropped - with UNSUPPORTED_VERSION and a v0 body listing our versions, so a newer client
downgrades instead of disconnecting (what Kafka does).

Feature flags (v3+, KIP-584): SupportedFeatures are this kafkapy's (controller/features.py),
FinalizedFeatures the metadata image's finalized levels (min = max = the level, as Kafka answers
since KIP-778) and FinalizedFeaturesEpoch the image's metadata offset, as Kafka's KRaft brokers
give it (-1 before the active controller has finalized anything). Below v4 a supported feature
whose minimum is 0 is left out: clients before Kafka 3.9 refuse such a range.

Not yet: UpdateFeatures (key 57) - the levels are fixed at what a new cluster finalizes.
"""

from __future__ import annotations

from kafkapy.controller.features import SUPPORTED_FEATURES
from kafkapy.controller.image import MetadataImage
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


#: the first ApiVersions version whose SupportedFeatures may hold a minimum level of 0
_MIN_LEVEL_0_VERSION = 4


def add_features(response: ApiVersionsResponse, image: MetadataImage, api_version: int) -> None:
    """Fill the v3+ feature fields of `response` from `image` (see the module docstring)."""
    response.supported_features = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in SUPPORTED_FEATURES.items()
        if lo > 0 or api_version >= _MIN_LEVEL_0_VERSION
    ]
    response.finalized_features = [
        ApiVersionsResponse.FinalizedFeatureKey(
            name=name, max_version_level=level, min_version_level=level
        )
        for name, level in image.features.items()
    ]
    response.finalized_features_epoch = image.offset if image.features else -1


@handler(ApiKey.API_VERSIONS, min_version=0, max_version=4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys())
    if ctx.api_version >= 3:
        add_features(response, ctx.broker.cluster.image, ctx.api_version)
    return response


def unsupported_version_response(header: RequestHeader) -> bytes:
    """The encoded (unprefixed) v0 UNSUPPORTED_VERSION answer to an ApiVersions we cannot speak."""
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys())
    return encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
