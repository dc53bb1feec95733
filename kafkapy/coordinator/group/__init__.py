"""The group coordinator as a state machine: classic groups (JoinGroup/SyncGroup), KIP-848
consumer groups (ConsumerGroupHeartbeat) and their committed offsets.

Public facade: the server imports only from here. Each name loads its submodule on first use
(PEP 562): the broker builds its group driver at start, and a broker nobody asked about a
group yet does not need the coordinator's record, state and result classes (tens of
milliseconds of dataclass creation at import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.coordinator.group.consumer import (
        DescribedConsumerGroup,
        DescribedConsumerMember,
        HeartbeatResult,
    )
    from kafkapy.coordinator.group.consumer_state import (
        ConsumerGroup,
        ConsumerGroupState,
        MemberState,
    )
    from kafkapy.coordinator.group.coordinator import (
        GroupCoordinator,
    )
    from kafkapy.coordinator.group.group_configs import (
        GROUP_CONFIGS,
        GroupConfigKey,
        group_config_problem,
        group_setting,
    )
    from kafkapy.coordinator.group.partitioning import (
        CONSUMER_OFFSETS_TOPIC,
        offsets_partition_for,
    )
    from kafkapy.coordinator.group.records import (
        ConsumerGroupKey,
        ConsumerGroupValue,
        ConsumerMemberKey,
        ConsumerMemberValue,
        GroupMetadataKey,
        GroupMetadataValue,
        GroupRecord,
        GroupRecordError,
        MemberMetadataValue,
        OffsetCommitKey,
        OffsetCommitValue,
        decode_key,
        decode_value,
        encode_key,
        encode_value,
    )
    from kafkapy.coordinator.group.results import (
        PENDING,
        Completion,
        DescribedGroup,
        DescribedMember,
        FetchedOffset,
        GroupConfig,
        JoinedMember,
        JoinGroupResult,
        LeaveGroupResult,
        LeaveMemberResult,
        ListedGroup,
        OffsetDeleteResult,
        OffsetFetchResult,
        OffsetToCommit,
        Pending,
        Result,
        SyncGroupResult,
        TopicPartition,
    )
    from kafkapy.coordinator.group.state import (
        VALID_PREVIOUS,
        ClassicGroup,
        GroupState,
        Member,
    )

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "GROUP_CONFIGS",
    "PENDING",
    "VALID_PREVIOUS",
    "ClassicGroup",
    "Completion",
    "ConsumerGroup",
    "ConsumerGroupKey",
    "ConsumerGroupState",
    "ConsumerGroupValue",
    "ConsumerMemberKey",
    "ConsumerMemberValue",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupConfig",
    "GroupConfigKey",
    "GroupCoordinator",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecord",
    "GroupRecordError",
    "GroupState",
    "HeartbeatResult",
    "JoinGroupResult",
    "JoinedMember",
    "LeaveGroupResult",
    "LeaveMemberResult",
    "ListedGroup",
    "Member",
    "MemberMetadataValue",
    "MemberState",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "OffsetDeleteResult",
    "OffsetFetchResult",
    "OffsetToCommit",
    "Pending",
    "Result",
    "SyncGroupResult",
    "TopicPartition",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "group_config_problem",
    "group_setting",
    "offsets_partition_for",
]

#: the submodule that defines each public name
_DEFINED_IN: dict[str, str] = {
    "DescribedConsumerGroup": "consumer",
    "DescribedConsumerMember": "consumer",
    "HeartbeatResult": "consumer",
    "ConsumerGroup": "consumer_state",
    "ConsumerGroupState": "consumer_state",
    "MemberState": "consumer_state",
    "GroupCoordinator": "coordinator",
    "GROUP_CONFIGS": "group_configs",
    "GroupConfigKey": "group_configs",
    "group_config_problem": "group_configs",
    "group_setting": "group_configs",
    "CONSUMER_OFFSETS_TOPIC": "partitioning",
    "offsets_partition_for": "partitioning",
    "ConsumerGroupKey": "records",
    "ConsumerGroupValue": "records",
    "ConsumerMemberKey": "records",
    "ConsumerMemberValue": "records",
    "GroupMetadataKey": "records",
    "GroupMetadataValue": "records",
    "GroupRecord": "records",
    "GroupRecordError": "records",
    "MemberMetadataValue": "records",
    "OffsetCommitKey": "records",
    "OffsetCommitValue": "records",
    "decode_key": "records",
    "decode_value": "records",
    "encode_key": "records",
    "encode_value": "records",
    "PENDING": "results",
    "Completion": "results",
    "DescribedGroup": "results",
    "DescribedMember": "results",
    "FetchedOffset": "results",
    "GroupConfig": "results",
    "JoinedMember": "results",
    "JoinGroupResult": "results",
    "LeaveGroupResult": "results",
    "LeaveMemberResult": "results",
    "ListedGroup": "results",
    "OffsetDeleteResult": "results",
    "OffsetFetchResult": "results",
    "OffsetToCommit": "results",
    "Pending": "results",
    "Result": "results",
    "SyncGroupResult": "results",
    "TopicPartition": "results",
    "VALID_PREVIOUS": "state",
    "ClassicGroup": "state",
    "GroupState": "state",
    "Member": "state",
}


def __getattr__(name: str) -> object:
    """Import the submodule defining `name` (once: the value is then a module global)."""
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
