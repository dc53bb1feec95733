"""What a copied segment consists of in the object store, and where each object goes.

A rolled local segment is copied as up to six objects, Kafka's `LogSegmentData`: the segment
itself, its offset and time indexes, the producer snapshot as of its end, the leader-epoch
checkpoint covering it, and its transaction index (absent when it has no aborted
transaction: `RemoteLogSegmentMetadata.txn_index_empty` says so, and nothing is uploaded).

Keys follow the layout of the widely used S3 plugin for Kafka, so operators recognise them:
`<topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.<suffix>` (the store adds
`rsm.config.key.prefix/` in front). Ids are in Kafka's text form (URL-safe base64, no padding).
Why the topic id in the key: a topic deleted and recreated under the same name never meets its
predecessor's objects, and deletion by prefix removes one incarnation only.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid

__all__ = [
    "RemoteLogSegmentId",
    "SegmentObject",
    "TopicIdPartition",
    "kafka_uuid",
    "partition_prefix",
    "segment_object_key",
]


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's text form of a UUID (what `Uuid.toString()` prints)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class TopicIdPartition:
    """A partition of one incarnation of a topic (name and id), as Kafka's remote tier keys it."""

    topic: str
    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class RemoteLogSegmentId:
    """A copied segment: its partition and a UUID chosen when its copy starts.

    Why a fresh id and not the base offset: a copy that failed halfway and is retried, or a
    segment copied again by a new leader after an unclean election, must not overwrite the
    objects that metadata of an earlier attempt may still point at.
    """

    partition: TopicIdPartition
    id: uuid.UUID


class SegmentObject(enum.Enum):
    """The objects of one copied segment, with their key suffix."""

    SEGMENT = ".log"
    OFFSET_INDEX = ".index"
    TIME_INDEX = ".timeindex"
    PRODUCER_SNAPSHOT = ".snapshot"
    LEADER_EPOCH_CHECKPOINT = ".leader_epoch_checkpoint"
    TRANSACTION_INDEX = ".txnindex"


def partition_prefix(tp: TopicIdPartition) -> str:
    """The key prefix under which every object of the partition lives (ends with `/`)."""
    return f"{tp.topic}-{kafka_uuid(tp.topic_id)}/{tp.partition}/"


def segment_object_key(segment_id: RemoteLogSegmentId, start_offset: int, kind: SegmentObject) -> str:
    """The key of one object of a copied segment."""
    return (f"{partition_prefix(segment_id.partition)}{start_offset:020d}-"
            f"{kafka_uuid(segment_id.id)}{kind.value}")
