"""Offsets as the admin commands need them: log start/end (by timestamp), committed, commit.

Why a module: `topics describe`, `groups describe|reset-offsets` and `consume --since` all ask
the partition leaders (ListOffsets) and the group coordinator (OffsetFetch/OffsetCommit); each
request goes to the broker that owns the answer, so they work on a multi-broker cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkapy.cli.common import CliError, check
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

__all__ = [
    "EARLIEST",
    "EARLIEST_LOCAL",
    "LATEST",
    "LATEST_TIERED",
    "commit_offsets",
    "committed_offsets",
    "list_offsets",
]

EARLIEST, LATEST = -2, -1
#: KIP-405's earliest-local (ListOffsets v8+) and KIP-1005's latest-tiered (v9+) timestamps
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
#: the first ListOffsets version that knows each special timestamp (Kafka's client refuses to
#: send them older: an older broker would take them for a plain timestamp)
_MIN_VERSION = {EARLIEST_LOCAL: 8, LATEST_TIERED: 9}
TP = tuple[str, int]


def list_offsets(
    admin: Admin, partitions: Iterable[TP], timestamp: int = LATEST, *, skip_unreachable: bool = False
) -> dict[TP, int]:
    """The offset at `timestamp` (EARLIEST, LATEST or ms) of each partition, from its leader.

    A timestamp past the last record answers -1 (Kafka's "no such offset"); EARLIEST_LOCAL and
    LATEST_TIERED are asked only of leaders whose ListOffsets has them. Partitions whose
    leader answers an error are left out, and with `skip_unreachable` so are those of a leader
    that cannot be reached (a describe must still show the partitions of a broker that just
    died - finding those is what it is run for).
    """
    out: dict[TP, int] = {}
    for leader, tps in admin.by_leader(partitions).items():
        if leader < 0:
            continue
        try:
            if admin.broker(leader).version(ApiKey.LIST_OFFSETS) < _MIN_VERSION.get(timestamp, 0):
                continue  # a broker without tiered storage's ListOffsets: no answer
        except CliError:
            if not skip_unreachable:
                raise
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                        for p in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        )
        try:
            response: ListOffsetsResponse = admin.broker(leader).call(ApiKey.LIST_OFFSETS, request)
        except CliError:
            if not skip_unreachable:
                raise
            continue
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code == ErrorCode.NONE:
                    out[(topic.name, part.partition_index)] = part.offset
    return out


def committed_offsets(admin: Admin, group: str) -> dict[TP, int]:
    """Every committed offset of `group` (from its coordinator)."""
    response: OffsetFetchResponse = admin.coordinator(group).call(
        ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None), cap=7
    )
    check(response.error_code, f"group {group}")
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in response.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def commit_offsets(admin: Admin, group: str, offsets: Mapping[TP, int]) -> None:
    """Commit `offsets` for `group` as an admin (no member): Kafka refuses it for a live group."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in sorted(offsets.items()):
        by_topic.setdefault(t, []).append((p, o))
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(
                name=t,
                partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata=""
                    )
                    for p, o in ps
                ],
            )
            for t, ps in by_topic.items()
        ],
    )
    response: OffsetCommitResponse = admin.coordinator(group).call(
        ApiKey.OFFSET_COMMIT, request, cap=8
    )
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code != ErrorCode.NONE:
                raise CliError(
                    f"committing {topic.name}-{part.partition_index} for group {group}", part.error_code
                )
