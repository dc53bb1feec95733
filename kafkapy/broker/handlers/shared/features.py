"""The feature fields of an ApiVersions v3+ answer, shared by the broker and controller listeners.

SupportedFeatures are this kafkapy's (controller/features.py), FinalizedFeatures the metadata
image's finalized levels (min = max = the level, as Kafka answers since KIP-778) and
FinalizedFeaturesEpoch the image's metadata offset, as Kafka's KRaft nodes give it (-1 before
the active controller has finalized anything). Below v4 a supported feature whose minimum is 0
is left out: clients before Kafka 3.9 refuse such a range (ApiVersionsResponse.json says so).
"""

from __future__ import annotations

from kafkapy.controller.features import SUPPORTED_FEATURES
from kafkapy.controller.image import MetadataImage
from kafkapy.protocol.messages import ApiVersionsResponse

__all__ = ["FEATURES_VERSION", "add_features"]

#: the first ApiVersions version with feature fields
FEATURES_VERSION = 3
#: the first ApiVersions version whose SupportedFeatures may hold a minimum level of 0
_MIN_LEVEL_0_VERSION = 4


def add_features(response: ApiVersionsResponse, image: MetadataImage, api_version: int) -> None:
    """Fill the feature fields of `response` from `image` (nothing below v3)."""
    if api_version < FEATURES_VERSION:
        return
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
