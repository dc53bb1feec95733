"""Kafka's LogValidator rules for client batches that need the records, not just the header.

Why a separate step: `validate_batch` checks what the header alone can prove (CRC, counts,
producer fields) at batch cost. A few of Kafka's rules are about records:

- a compacted topic refuses records without a key (INVALID_RECORD, "Compacted topic cannot
  accept message without key"), since the cleaner could never remove them;
- on a CreateTime topic every record's timestamp must lie within
  [now - `message.timestamp.before.max.ms`, now + `message.timestamp.after.max.ms`]
  (INVALID_TIMESTAMP);
- the batch's max timestamp is the largest record timestamp. Kafka recomputes it from the
  records; here it is recomputed (and the header rewritten, CRC included) only when the header
  cannot be right - unset (-1 or 0, what older Go clients write) or below the base timestamp -
  because the time index and ListOffsets by timestamp go by it.

Cost: records are decoded only for a batch that needs it - a compacted topic, a finite
`before.max.ms` (the smallest timestamp is not in the header), a header max timestamp that
cannot be trusted, or one past the `after.max.ms` bound (to name the records). Everything else
stays at batch cost. Decoding also proves the records count and their framing (what Kafka's
validator checks while iterating). A refused batch raises `RecordValidationError` whose
`record_errors` name each record by its index in the batch; nothing of the append is written.
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode, RecordValidationError
from kafkapy.protocol.records import BatchHeader, Record, decode_records, set_max_timestamp
from kafkapy.storage.config import INT64_MAX, LogConfig

__all__ = ["RecordRules", "header_max_timestamp_trusted"]

_KEYLESS = "Compacted topic cannot accept message without key in topic partition {}."


def header_max_timestamp_trusted(header: BatchHeader) -> bool:
    """Whether the header's max timestamp can stand for the records' (no record is read).

    Unset (-1) or zero, or below the base timestamp (the first record's), cannot be a real
    maximum of a batch a current client wrote."""
    return header.max_timestamp > 0 and header.max_timestamp >= header.base_timestamp


class RecordRules:
    """The record-level rules of one `LogConfig`, digested once per config so that the append
    path pays a few comparisons per batch (`PartitionLog` keeps one per config it sees)."""

    __slots__ = ("after", "always", "before", "compact", "config", "create_time")

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.compact = config.compact
        self.create_time = not config.log_append_time
        self.before = config.message_timestamp_before_max_ms
        self.after = config.message_timestamp_after_max_ms
        # the records must be read whatever the header says
        self.always = self.compact or (self.create_time and self.before < INT64_MAX)

    def needs_records(self, header: BatchHeader, now_ms: int) -> bool:
        """Whether this batch must be decoded (the header alone cannot settle it)."""
        if self.always:
            return True
        if not self.create_time:
            return False
        top = header.max_timestamp
        return top <= 0 or top < header.base_timestamp or top - now_ms > self.after

    def validate(
        self,
        data: bytearray | memoryview,
        pos: int,
        header: BatchHeader,
        now_ms: int,
        partition_name: str,
    ) -> None:
        """Apply the rules to the batch at `pos` by its records (call when `needs_records`);
        may rewrite its max timestamp in `data` and in `header`. Raises
        `RecordValidationError`, or `InvalidRecordError` for malformed records."""
        records = decode_records(data, pos, header)
        if self.compact:
            keyless = [
                (i, _KEYLESS.format(partition_name))
                for i, record in enumerate(records)
                if record.key is None
            ]
            if keyless:
                raise RecordValidationError(ErrorCode.INVALID_RECORD, keyless)
        if self.create_time:
            _check_timestamps(data, pos, header, records, now_ms, self.before, self.after)


def _check_timestamps(
    data: bytearray | memoryview,
    pos: int,
    header: BatchHeader,
    records: list[Record],
    now_ms: int,
    before: int,
    after: int,
) -> None:
    base = header.base_timestamp
    largest = -1
    bad: list[tuple[int, str]] = []
    low = now_ms - before
    high = now_ms + after
    for i, record in enumerate(records):
        ts = base + record.timestamp_delta
        largest = max(largest, ts)
        if ts >= 0 and (ts < low or ts > high):
            bad.append((
                i,
                f"Timestamp {ts} of message with offset delta {record.offset_delta} is out of "
                f"range. The timestamp should be within [{low}, {high}]",
            ))
    if bad:
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP, bad)
    if largest != header.max_timestamp:
        set_max_timestamp(data, pos, largest, False)
        header.max_timestamp = largest
