"""Kafka's LogValidator record checks for client batches, by one walk of the records' bytes.

Why: `validate_batch` proves what the header and the CRC can (the bytes are the producer's,
the counts agree), not that the bytes are records. Kafka iterates every record of a client
batch before the append, and so does `RecordRules.validate`, with
`protocol.record_walk.walk_records` (no record object is built, compressed batches are
decompressed under the decompression-bomb cap). The same pass applies the topic's rules:

- malformed records (a count, length or varint that does not add up): CORRUPT_MESSAGE;
- a compacted topic refuses records without a key (INVALID_RECORD, "Compacted topic cannot
  accept message without key"), since the cleaner could never remove them;
- on a CreateTime topic every record's timestamp must lie within
  [now - `message.timestamp.before.max.ms`, now + `message.timestamp.after.max.ms`]
  (INVALID_TIMESTAMP);
- the batch's max timestamp is the largest record timestamp, as Kafka recomputes it; when the
  header says otherwise (unset, as older Go clients write it, or wrong) the header is rewritten,
  CRC included, because the time index and ListOffsets by timestamp go by it.

A refused batch raises a `RecordValidationError` (`MalformedRecordError` for CORRUPT_MESSAGE)
whose `record_errors` name the records by their index in the batch; nothing of the append is
written. The walk costs about a microsecond per record; `perf/bench.py` measures it on the
produce path.
"""

from __future__ import annotations

from kafkapy.protocol.record_walk import NO_TIMESTAMP_LIMIT, RecordChecks, walk_records
from kafkapy.protocol.records import BatchHeader, set_max_timestamp
from kafkapy.storage.config import LogConfig

__all__ = ["RecordRules"]


class RecordRules:
    """The record-level rules of one `LogConfig`, digested once per config (`PartitionLog`
    keeps one per config it sees) and into `RecordChecks` once per clock reading."""

    __slots__ = ("_checks", "after", "before", "compact", "config", "create_time")

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.compact = config.compact
        self.create_time = not config.log_append_time
        self.before = config.message_timestamp_before_max_ms
        self.after = config.message_timestamp_after_max_ms
        self._checks: tuple[int, RecordChecks] | None = None

    def checks(self, now_ms: int, partition_name: str) -> RecordChecks:
        """What `walk_records` enforces at `now_ms` (the timestamp range only on CreateTime).

        The last digest is kept with its clock reading as one attribute, replaced whole, so
        walks in worker threads (`PartitionLog.validate`) never see a range of another time."""
        cached = self._checks
        if cached is not None and cached[0] == now_ms and cached[1].partition == partition_name:
            return cached[1]
        low, high = -NO_TIMESTAMP_LIMIT, NO_TIMESTAMP_LIMIT
        if self.create_time:
            low, high = now_ms - self.before, now_ms + self.after
        checks = RecordChecks(partition_name, self.compact, low, high)
        self._checks = (now_ms, checks)
        return checks

    def validate(
        self,
        data: bytearray | memoryview,
        pos: int,
        header: BatchHeader,
        now_ms: int,
        partition_name: str,
    ) -> None:
        """Walk the framed, CRC-checked batch at `pos`; may rewrite its max timestamp in `data`
        and in `header`. Raises `RecordValidationError` (`MalformedRecordError` for malformed
        records) or, for a compressed region that does not inflate within the cap,
        `CorruptRecordError` / `InvalidRecordError`."""
        largest = walk_records(data, pos, header, self.checks(now_ms, partition_name))
        if self.create_time and largest != header.max_timestamp:
            set_max_timestamp(data, pos, largest, False)
            header.max_timestamp = largest
