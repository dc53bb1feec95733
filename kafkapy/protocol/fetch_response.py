"""FetchResponse, the hot path's way: bodies hand-built around file regions (the zero-copy
path), and the follower's slim parser of the answers it gets (`parse_fetch_response`).

Why not the generic codec: it needs record data as bytes in memory, and the point of the fetch
path is that record batches go from segment files to the socket with `sendfile`. The framing
around them is tiny, so this module writes it directly - per partition, never per record - and
computes every length up front. Field layout per version follows Kafka's FetchResponse schema
(v4-17; flexible from v12, topic ids instead of names from v13); tests check the output against
the generic decoder (`decode_response`) for every version.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.error_versions import older_codes
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.primitives import uvarint_bytes
from kafkapy.protocol.raw_response import FileRegion, RawResponse, Segment

__all__ = [
    "FetchedPartition",
    "PartitionPart",
    "TopicPart",
    "encode_fetch_response",
    "fetch_response_session_id",
    "parse_fetch_response",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_I64 = struct.Struct(">q")


@dataclass(slots=True)
class PartitionPart:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # None: null aborted list (read_uncommitted); list of (producer_id, first_offset) otherwise
    aborted: list[tuple[int, int]] | None = None
    records: list[FileRegion | bytes] | None = field(default_factory=list)
    # (epoch, end offset) for a follower whose log diverged (KIP-279, tagged field 0 in v12+)
    diverging_epoch: tuple[int, int] | None = None
    # v11+ (KIP-392): the replica a consumer should fetch this partition from instead; -1: here
    preferred_read_replica: int = -1

    @property
    def records_size(self) -> int:
        if not self.records:
            return 0
        return sum(r.length if isinstance(r, FileRegion) else len(r) for r in self.records)


@dataclass(slots=True)
class TopicPart:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionPart] = field(default_factory=list)


def _array_len(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else _I32.pack(n)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (uvarint_bytes(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def encode_fetch_response(
    version: int,
    topics: list[TopicPart],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_time_ms: int = 0,
) -> RawResponse:
    """The FetchResponse body (no size prefix, no response header) as bytes + file regions."""
    flexible = version >= 12
    segments: list[Segment] = []
    head = bytearray()
    older = older_codes(ApiKey.FETCH, version)  # codes this version predates (KIP-112)
    if version >= 1:
        head += _I32.pack(throttle_time_ms)
    if version >= 7:
        head += _I16.pack(error_code) + _I32.pack(session_id)
    head += _array_len(len(topics), flexible)
    errors = {error_code: 1} if version >= 7 else {}
    for topic in topics:
        if version >= 13:
            head += topic.topic_id.bytes
        else:
            head += _string(topic.name, flexible)
        head += _array_len(len(topic.partitions), flexible)
        for part in topic.partitions:
            code = older.get(part.error_code, part.error_code) if older else part.error_code
            errors[code] = errors.get(code, 0) + 1
            head += _PART.pack(part.partition_index, code, part.high_watermark)
            if version >= 4:
                head += _I64.pack(part.last_stable_offset)
            if version >= 5:
                head += _I64.pack(part.log_start_offset)
            if version >= 4:
                if part.aborted is None:
                    head += b"\x00" if flexible else _I32.pack(-1)
                else:
                    head += _array_len(len(part.aborted), flexible)
                    for producer_id, first_offset in part.aborted:
                        head += _I64.pack(producer_id) + _I64.pack(first_offset)
                        if flexible:
                            head += b"\x00"
            if version >= 11:
                head += _I32.pack(part.preferred_read_replica)
            if part.records is None:
                head += b"\x00" if flexible else _I32.pack(-1)
            else:
                size = part.records_size
                head += uvarint_bytes(size + 1) if flexible else _I32.pack(size)
                if size:
                    segments.append(bytes(head))
                    head = bytearray()
                    segments.extend(part.records)
            if flexible:
                if part.diverging_epoch is None:
                    head += b"\x00"  # partition tagged fields: none
                else:  # one tagged field, tag 0: EpochEndOffset (13 bytes with its own tags)
                    epoch, end_offset = part.diverging_epoch
                    head += b"\x01\x00\x0d" + _I32.pack(epoch) + _I64.pack(end_offset) + b"\x00"
        if flexible:
            head += b"\x00"  # topic tagged fields
    if flexible:
        head += b"\x00"  # top-level tagged fields
    segments.append(bytes(head))
    return RawResponse(segments=segments, flexible=flexible, error_counts=errors)


# -- the follower's side: a slim FetchResponse parser -----------------------------------------------

_ERROR_PART = struct.Struct(">ihqqq")  # partition, error, high watermark, last stable, log start
_EPOCH_END = struct.Struct(">iq")  # diverging epoch: epoch, end offset


@dataclass(slots=True)
class FetchedPartition:
    """One partition of a replica fetch answer; `records` is a view of the response frame."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview | None
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset): truncate first (KIP-279)


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if pos >= len(buf):
            raise ProtocolError("fetch response: truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise ProtocolError("fetch response: varint longer than 5 bytes")


def fetch_response_session_id(body: bytes | bytearray | memoryview) -> int:
    """The session id of a FetchResponse v7+ body (after the response header): the follower's
    fetch session (KIP-227) continues under it. ProtocolError for a body too short to hold it."""
    buf = memoryview(body)
    _need(buf, 6, 4)  # throttle_time_ms, error_code, then session_id
    return int(_I32.unpack_from(buf, 6)[0])


def _need(buf: memoryview, pos: int, n: int) -> None:
    if n < 0 or pos + n > len(buf):
        raise ProtocolError(f"fetch response: {n} bytes wanted at {pos}, frame is {len(buf)}")


def _skip_tags(buf: memoryview, pos: int, part: FetchedPartition | None = None) -> int:
    """Skip a tagged-field section; a partition's tag 0 (diverging epoch) is kept."""
    count, pos = _read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        _need(buf, pos, size)
        if part is not None and tag == 0:
            _need(buf, pos, _EPOCH_END.size)
            part.diverging_epoch = _EPOCH_END.unpack_from(buf, pos)
        pos += size
    return pos


def parse_fetch_response(version: int, body: bytes | bytearray | memoryview) -> tuple[int, list[tuple[uuid.UUID, list[FetchedPartition]]]]:
    """(top-level error code, [(topic id, partitions)]) of a FetchResponse v13+ body (after the
    response header).

    Why beside the encoder and not the generic codec: a follower's Fetch answer is megabytes of
    record batches, and the generic decoder first copies a received bytearray whole (BytesIO)
    and builds a message object per partition; this walks the framing once and slices
    `records` out of `body` as views, which the log appends as they are. Only what a follower
    reads is kept (aborted transactions and other tagged fields are skipped). Bad input raises
    ProtocolError, never anything else."""
    if version < 13:
        raise ProtocolError(f"parse_fetch_response: v{version} has no topic ids")
    buf = memoryview(body)
    try:
        _need(buf, 0, 10)
        error_code = _I16.unpack_from(buf, 4)[0]
        pos = 10
        n_topics, pos = _read_uvarint(buf, pos)
        topics: list[tuple[uuid.UUID, list[FetchedPartition]]] = []
        for _ in range(n_topics - 1):
            _need(buf, pos, 16)
            topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
            pos += 16
            n_parts, pos = _read_uvarint(buf, pos)
            parts: list[FetchedPartition] = []
            for _ in range(n_parts - 1):
                _need(buf, pos, _ERROR_PART.size)
                index, code, hw, lso, start = _ERROR_PART.unpack_from(buf, pos)
                pos += _ERROR_PART.size
                n_aborted, pos = _read_uvarint(buf, pos)  # nullable compact array
                for _ in range(n_aborted - 1):
                    _need(buf, pos, 16)
                    pos = _skip_tags(buf, pos + 16)
                _need(buf, pos, 4)  # preferred read replica
                pos += 4
                size, pos = _read_uvarint(buf, pos)
                records = None
                if size:
                    _need(buf, pos, size - 1)
                    records = buf[pos : pos + size - 1]
                    pos += size - 1
                part = FetchedPartition(index, code, hw, lso, start, records)
                pos = _skip_tags(buf, pos, part)
                parts.append(part)
            pos = _skip_tags(buf, pos)
            topics.append((topic_id, parts))
        _skip_tags(buf, pos)
    except struct.error as e:
        raise ProtocolError(f"fetch response: {e}") from None
    return error_code, topics
