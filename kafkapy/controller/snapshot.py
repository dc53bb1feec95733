"""Metadata snapshots: a `MetadataImage` as bytes, and back (KIP-630's snapshot content).

Why records and not a bespoke dump: a snapshot is the image written as the metadata records
that rebuild it from empty, through the same codec and the same `MetadataImage.apply` as the
log - so "image from snapshot == image from replaying the log up to its end" needs no second
encoding to keep in step, and a snapshot reads like a (compacted) piece of the log.

Layout: record batches (the log's own format, so each batch carries its CRC), every batch with
the snapshot's epoch as partition leader epoch and offsets counting records from 0:
- first record: the header - key `kafkapy-snapshot-header`, value
  `version (int16) | end offset (int64) | epoch (int32) | timestamp ms (int64)`;
- then one record per metadata record (value = `encode_record`), in an order `apply` accepts
  (the finalized feature levels first, as Kafka's snapshots begin with metadata.version; brokers, broker and group configs, client quotas, producer ids, SCRAM credentials, ACLs,
  then each topic with its partitions and configs);
- last record: the footer - key `kafkapy-snapshot-footer`, value
  `version (int16) | metadata record count (int64)`.
A file without its footer (cut short) or with a bad CRC does not decode: `SnapshotError`.

Sans-IO like the rest of the package: the server names, writes and reads the files.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator

from kafkapy.controller.image import MetadataApplyError, MetadataImage
from kafkapy.controller.records import (
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_batches,
    validate_batch,
)
from kafkapy.protocol.sasl import SCRAM_MECHANISM_TYPES

__all__ = [
    "SnapshotError",
    "SnapshotHeader",
    "decode_snapshot",
    "encode_snapshot",
    "image_from_records",
    "image_records",
]

SNAPSHOT_VERSION = 0
HEADER_KEY = b"kafkapy-snapshot-header"
FOOTER_KEY = b"kafkapy-snapshot-footer"
_HEADER = struct.Struct(">hqiq")
_FOOTER = struct.Struct(">hq")
#: metadata records per batch: big enough that batch overhead is small, small enough that a
#: FetchSnapshot chunk boundary never matters for memory
RECORDS_PER_BATCH = 500


_MECHANISM_TYPES = {name: t for t, name in SCRAM_MECHANISM_TYPES.items()}


class SnapshotError(ValueError):
    """Bytes that are not a complete, intact snapshot (cut short, bad CRC, bad header)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """Which log prefix the snapshot stands for: offsets below `end_offset`, the last of them
    of Raft epoch `epoch`."""

    end_offset: int
    epoch: int
    timestamp_ms: int


def image_records(image: MetadataImage) -> Iterator[MetadataRecord]:
    """Records that rebuild `image` when applied in order to an empty image."""
    for name, level in image.features.items():
        yield FeatureLevelRecord(name, level)
    for b in image.brokers.values():
        yield RegisterBrokerRecord(b.id, b.incarnation_id, b.epoch, b.endpoints, b.rack, b.fenced)
        if b.in_controlled_shutdown:
            yield BrokerRegistrationChangeRecord(b.id, b.epoch, None, True)
    for resource, configs in image.broker_configs.items():
        for name, value in configs.items():
            yield ConfigRecord(ConfigResourceType.BROKER, resource, name, value)
    for group, configs in image.group_configs.items():
        for name, value in configs.items():
            yield ConfigRecord(ConfigResourceType.GROUP, group, name, value)
    for entity, quotas in image.client_quotas.items():
        for key, quota in quotas.items():
            yield ClientQuotaRecord(entity, key, quota)
    if image.next_producer_id > 0:
        yield ProducerIdsRecord(-1, -1, image.next_producer_id)
    for (user, mechanism), c in image.scram_credentials.items():
        yield UserScramCredentialRecord(
            user, _MECHANISM_TYPES[mechanism], c.salt, c.stored_key, c.server_key, c.iterations
        )
    yield from image.acls.values()
    for t in image.topics.values():
        yield TopicRecord(t.name, t.topic_id)
        for pid, p in t.partitions.items():
            yield PartitionRecord(
                pid,
                t.topic_id,
                p.replicas,
                p.isr,
                p.leader,
                p.leader_epoch,
                p.partition_epoch,
                p.adding_replicas,
                p.removing_replicas,
            )
        for name, value in t.configs.items():
            yield ConfigRecord(ConfigResourceType.TOPIC, t.name, name, value)


def image_from_records(
    records: Iterator[MetadataRecord] | list[MetadataRecord], offset: int
) -> MetadataImage:
    """The image `records` rebuild from empty, as of log offset `offset`. A record that does
    not fit raises `SnapshotError` (a snapshot is written whole from one image: it must fit)."""
    image = MetadataImage()
    for record in records:
        try:
            image.apply(record, offset)
        except MetadataApplyError as exc:
            raise SnapshotError(f"snapshot record {record!r} does not fit: {exc}") from exc
    image.offset = offset
    return image


def encode_snapshot(
    image: MetadataImage, *, end_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """`image` (the state after applying offsets below `end_offset`) as snapshot bytes."""
    values: list[tuple[bytes | None, bytes]] = [
        (HEADER_KEY, _HEADER.pack(SNAPSHOT_VERSION, end_offset, epoch, timestamp_ms))
    ]
    count = 0
    for record in image_records(image):
        values.append((None, encode_record(record)))
        count += 1
    values.append((FOOTER_KEY, _FOOTER.pack(SNAPSHOT_VERSION, count)))
    out = bytearray()
    for start in range(0, len(values), RECORDS_PER_BATCH):
        chunk = values[start : start + RECORDS_PER_BATCH]
        records = [
            Record(offset_delta=i, timestamp_delta=0, key=k, value=v, headers=[])
            for i, (k, v) in enumerate(chunk)
        ]
        out += build_batch(
            records, base_offset=start, base_timestamp=timestamp_ms, partition_leader_epoch=epoch
        )
    return bytes(out)


def decode_snapshot(data: bytes | bytearray | memoryview) -> tuple[SnapshotHeader, MetadataImage]:
    """The header and image of snapshot bytes; `SnapshotError` unless they are whole and
    intact."""
    buf = bytes(data)
    header: SnapshotHeader | None = None
    records: list[MetadataRecord] = []
    footer_count: int | None = None
    consumed = 0
    try:
        for pos, batch in iter_batches(buf):
            validate_batch(buf, pos, batch, allow_compacted=True)
            # base offset and leader epoch sit outside the batch CRC: check them against
            # what they must be (records so far; the header's epoch)
            seen = len(records) + (header is not None)
            if batch.base_offset != seen or (
                header is not None and batch.partition_leader_epoch != header.epoch
            ):
                raise SnapshotError(f"snapshot batch at byte {pos} is out of place")
            consumed = pos + batch.batch_length + 12
            for record in decode_records(buf, pos, batch):
                if footer_count is not None:
                    raise SnapshotError("records after the snapshot footer")
                key, value = record.key, bytes(record.value or b"")
                if header is None:
                    header = _read_header(key, value)
                    if batch.partition_leader_epoch != header.epoch:
                        raise SnapshotError("snapshot header and batch disagree on the epoch")
                elif key == FOOTER_KEY:
                    version, footer_count = (
                        _FOOTER.unpack(value) if len(value) == _FOOTER.size else (-1, -1)
                    )
                    if version != SNAPSHOT_VERSION or footer_count != len(records):
                        raise SnapshotError("snapshot footer does not match its records")
                else:
                    records.append(decode_record(value))
    except ProtocolError as exc:
        raise SnapshotError(f"corrupt snapshot: {exc}") from exc
    if header is None or footer_count is None or consumed != len(buf):
        raise SnapshotError("snapshot is incomplete (no header, no footer or trailing bytes)")
    return header, image_from_records(records, header.end_offset - 1)


def _read_header(key: bytes | None, value: bytes) -> SnapshotHeader:
    if key != HEADER_KEY or len(value) != _HEADER.size:
        raise SnapshotError("snapshot does not start with a header")
    version, end_offset, epoch, ts = _HEADER.unpack(value)
    if version != SNAPSHOT_VERSION or end_offset < 0 or epoch < 0:
        raise SnapshotError(f"unsupported snapshot header (version {version}, end {end_offset})")
    return SnapshotHeader(end_offset, epoch, ts)
