"""Feature flags (KIP-584 / KIP-778): what this kafkapy supports and what a new cluster finalizes.

Why these levels (Kafka 4.0's numbers, which clients and Kafka's tools decode):
- `metadata.version` 25 (4.0-IV3, Kafka 4.0's latest production level and what it bootstraps
  a new cluster at). kafkapy has one behaviour, the 4.0 line's, and never switches record or
  RPC formats by level, so it supports exactly [25, 25]: claiming an older level (Kafka 4.0
  accepts 7..25) would promise a downgrade kafkapy cannot honour.
- `group.version` 1: the KIP-848 consumer group protocol (ConsumerGroupHeartbeat /
  ConsumerGroupDescribe) is always served, as in Kafka 4.0 where level 1 is the default.
- `transaction.version` is not finalized (0) and not advertised: level 1 means Kafka's flexible
  `__transaction_state` records and level 2 KIP-890 part 2 (Produce v12, EndTxn v5,
  AddPartitionsToTxn v5 with epoch bumps on every commit), which kafkapy does not implement -
  a Java producer that saw level 2 would switch to that protocol.
- `kraft.version` 0 (static voters, no KIP-853 reconfiguration) and
  `eligible.leader.replicas.version` 0 (no ELR): not finalized, not advertised.
A feature whose highest supported level is 0 is left out of the supported map, as Kafka's
brokers do; a finalized map never holds level 0 (a FeatureLevelRecord at 0 removes it).

The active controller writes the bootstrap levels once, as the first records it commits on a
metadata log that has no `metadata.version` (a new cluster, or a data dir from a kafkapy that
wrote none), so every image and snapshot carries them from then on.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy.controller.records import FeatureLevelRecord, MetadataRecord
from kafkapy.controller.state import ControllerResult, ControllerState

__all__ = [
    "BOOTSTRAP_LEVELS",
    "GROUP_VERSION",
    "METADATA_VERSION",
    "METADATA_VERSION_4_0_IV3",
    "SUPPORTED_FEATURES",
    "bootstrap_features",
    "needs_bootstrap",
]

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
#: Kafka's MetadataVersion.IBP_4_0_IV3 feature level
METADATA_VERSION_4_0_IV3 = 25

#: feature name -> (min, max) level this kafkapy supports (features with max 0 left out)
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (METADATA_VERSION_4_0_IV3, METADATA_VERSION_4_0_IV3),
    GROUP_VERSION: (0, 1),
}

#: the levels a new cluster's metadata log starts with, metadata.version first (Kafka's order)
BOOTSTRAP_LEVELS: Mapping[str, int] = {
    METADATA_VERSION: METADATA_VERSION_4_0_IV3,
    GROUP_VERSION: 1,
}


def needs_bootstrap(finalized: Mapping[str, int]) -> bool:
    """True while the image has no finalized metadata.version (the bootstrap is not written)."""
    return METADATA_VERSION not in finalized


def bootstrap_features(st: ControllerState) -> ControllerResult[None]:
    """The bootstrap FeatureLevelRecords if the image has none yet, else nothing. Only a missing
    metadata.version triggers it, so a level an operator changed later is never rewritten."""
    out: list[MetadataRecord] = []
    if needs_bootstrap(st.image.features):
        for name, level in BOOTSTRAP_LEVELS.items():
            if name not in st.image.features:
                st.emit(out, FeatureLevelRecord(name, level))
    return ControllerResult(out, None)
