"""Per-partition producer state: the broker's half of the idempotent producer.

Exactly-once delivery is at-least-once (the producer retries) plus idempotence (the partition
drops the retries). This module is the second half: for every producer id that wrote to the
partition it remembers the epoch and the metadata of the last `MAX_CACHED_BATCHES` batches, so a
retried batch is recognised and answered with its original offsets instead of being written twice.

Rules (everything that decides an append lives in `_validate_data` / `_validate_marker`):

1. Only batches with a producer id (>= 0) have state; others pass through untouched.
2. A client batch whose (epoch, first sequence, last sequence) equals one of the cached batches is
   a *duplicate*: nothing is written, the caller answers success with the cached offsets (what
   Kafka does for DUPLICATE_SEQUENCE_NUMBER since 1.0).
3. A lower epoch than the entry's is a zombie: INVALID_PRODUCER_EPOCH (KIP-588: the produce path
   answers INVALID_PRODUCER_EPOCH so the client can abort; PRODUCER_FENCED is the coordinator's
   answer to InitProducerId/AddPartitions/EndTxn).
4. A higher epoch starts the producer afresh: its first sequence must be 0, and the cached batches
   are dropped (the epoch bump resets the sequence).
5. Same epoch: the first sequence must follow the last one (`in_sequence`, wrapping from int32 max
   to 0); anything else is OUT_OF_ORDER_SEQUENCE_NUMBER (a gap, or a retry older than the cache).
6. A producer id with no state (never seen, or its state expired) must start at sequence 0;
   otherwise UNKNOWN_PRODUCER_ID, which tells the client to reset its sequence or bump its epoch.
7. Transactions: the first transactional batch of a producer opens a transaction at its base
   offset; a non-transactional batch while one is open is INVALID_TXN_STATE. A control marker
   (written by the coordinator, never by a client) closes it and yields a `CompletedTxn`; an abort
   also yields the aborted-transaction index entry.
8. The last stable offset is the smallest first offset of any open transaction, or of a completed
   one whose marker is not yet below the high watermark, capped by the high watermark.
9. Trusted origins (`LOG` rebuild, `REPLICATION`) skip the client checks but go through the very
   same update code, which is why a snapshot plus replay of the later batch headers reproduces the
   live state exactly.
10. Expiration: only the periodic sweep `remove_expired_producers(now_ms)` removes an entry: one
    the broker has not seen for `producer_id_expiration_ms` (`last_seen_ms`, the broker's clock at
    its last append) and with no open transaction. Nothing inside an append expires state, and
    record timestamps never do: a producer whose records carry CreateTime 1970 keeps its state
    between batches, as on Kafka. State rebuilt from a snapshot or the log has no broker clock
    for the past and takes the batch timestamp instead. Retention and compaction never remove
    producer state.

An append is two steps so a failed disk write leaves the state untouched: `validate_append`
checks every batch of the request against a staged copy and returns a `PendingAppend` (or the
duplicate's metadata); after the log append succeeded `complete_append` commits it.
`check_and_update` does both for one batch. The manager is single-owner (the partition's task):
no locks, and a `PendingAppend` is void once another append, sweep or truncation changed the
state.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "INT32_MAX",
    "MAX_CACHED_BATCHES",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "AbortedTxn",
    "AppendOrigin",
    "BatchHeaderFields",
    "BatchMetadata",
    "CompletedTxn",
    "ControlType",
    "PendingAppend",
    "ProducerBatch",
    "ProducerDescription",
    "ProducerSnapshot",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "UpdateResult",
    "in_sequence",
    "increment_sequence",
]

INT32_MAX = 2**31 - 1
NO_SEQUENCE = -1
NO_PRODUCER_EPOCH = -1
#: Kafka keeps five batches because clients allow at most five in-flight requests per connection
#: with idempotence on; any retry is therefore one of the last five batches.
MAX_CACHED_BATCHES = 5
#: `producer.id.expiration.ms` default (one day).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class ProducerStateError(ProtocolError):
    """A batch the producer state rejects; `error_code` is what the Produce response carries."""

    def __init__(self, reason: str, error_code: ErrorCode) -> None:
        super().__init__(reason, error_code)


class AppendOrigin(enum.Enum):
    """Who wrote the batch, which decides how much is checked."""

    CLIENT = "client"  # a Produce request: every rule, duplicate detection
    COORDINATOR = (
        "coordinator"  # a control marker from WriteTxnMarkers: epoch and coordinator epoch
    )
    REPLICATION = "replication"  # a follower copying the leader, which already checked
    LOG = "log"  # rebuilding from the log tail after a snapshot


_TRUSTED = frozenset({AppendOrigin.REPLICATION, AppendOrigin.LOG})


class ControlType(enum.IntEnum):
    """Control record type of a transaction marker (the key's type field in the control record)."""

    ABORT = 0
    COMMIT = 1


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past int32 max to 0 the way producers number batches."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """Whether `next_sequence` directly follows `last_sequence` (int32 max is followed by 0)."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class BatchHeaderFields(Protocol):
    """The batch-header fields `ProducerBatch.from_header` reads (`protocol.records.BatchHeader`
    has them; a Protocol keeps this layer free of the wire module's other types)."""

    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def is_transactional(self) -> bool: ...

    @property
    def is_control(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerBatch:
    """The batch-header fields producer state needs, as plain values (no wire or file types).

    `base_offset` is the offset the log assigns (the log end offset before the append: the
    partition has a single writer, so the caller knows it), `max_timestamp` the batch's final max
    timestamp. A control batch has `control` set (and `is_transactional` true, as Kafka writes it).
    """

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_offset_delta: int
    base_offset: int
    max_timestamp: int = -1
    is_transactional: bool = False
    control: ControlType | None = None
    coordinator_epoch: int = -1

    @classmethod
    def from_header(
        cls,
        header: BatchHeaderFields,
        *,
        base_offset: int | None = None,
        control: ControlType | None = None,
        coordinator_epoch: int = -1,
    ) -> ProducerBatch:
        """From a parsed batch header. `base_offset` overrides the header's (a produce request's
        batches carry 0 until the log assigns offsets); a control batch needs its record's
        type and coordinator epoch (`protocol.records.parse_control_record`)."""
        if header.is_control != (control is not None):
            raise ValueError("control must be given exactly for control batches")
        return cls(
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            last_offset_delta=header.last_offset_delta,
            base_offset=header.base_offset if base_offset is None else base_offset,
            max_timestamp=header.max_timestamp,
            is_transactional=header.is_transactional,
            control=control,
            coordinator_epoch=coordinator_epoch,
        )

    @property
    def is_control(self) -> bool:
        return self.control is not None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one written batch: enough to answer its retry."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id in one partition."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    #: Broker time of the last append (what expiration goes by); not part of snapshots, which
    #: keep Kafka's format: a rebuilt entry starts from `last_timestamp`.
    last_seen_ms: int = field(default=-1, compare=False)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            list(self.batches),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            self.last_seen_ms,
        )

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The cached batch `batch` retries, if any (same epoch, same first and last sequence)."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        last_seq = batch.last_sequence
        for cached in self.batches:
            if cached.first_seq == batch.base_sequence and cached.last_seq == last_seq:
                return cached
        return None

    def _bump_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.producer_epoch = epoch
            self.batches.clear()

    def _start_over(self) -> None:
        """Sequence 0 again in the same epoch, not as a wrap: the writer had forgotten this
        producer (its state expired) and took the batch as a new producer's first. Only a
        trusted origin (replay, replication) meets this - a client's is OUT_OF_ORDER_SEQUENCE
        here - and it must end where the writer did: an entry with nothing before the batch."""
        self.batches.clear()
        self.coordinator_epoch = -1

    def _add_batch(self, meta: BatchMetadata) -> None:
        self.batches.append(meta)
        if len(self.batches) > MAX_CACHED_BATCHES:
            del self.batches[0]


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker in this partition."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One `.txnindex` entry: read_committed fetches return these so clients drop the records.

    `last_stable_offset` is the LSO right after the abort marker, which lets a fetch stop scanning
    the index early (entries are ordered by it).
    """

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """Outcome of an append: a duplicate (write nothing) or the transactions it completed."""

    duplicate: BatchMetadata | None = None
    completed: tuple[CompletedTxn, ...] = ()
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducerDescription:
    """One row of a DescribeProducers answer."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class ProducerSnapshot:
    """Everything a snapshot stores: state as of `last_map_offset` (the next offset to replay)."""

    last_map_offset: int
    entries: tuple[ProducerStateEntry, ...]
    unreplicated: tuple[CompletedTxn, ...] = ()


@dataclass(slots=True)
class PendingAppend:
    """Validated but uncommitted updates for one append; commit with `complete_append`."""

    generation: int
    entries: dict[int, ProducerStateEntry]
    completed: list[CompletedTxn]
    began: dict[int, int]  # producer id -> first offset of a transaction opened by this append
    end_offset: int  # next offset after the append


class ProducerStateManager:
    """All producer state of one partition; see the module rules."""

    def __init__(
        self,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        last_map_offset: int = 0,
    ) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # Completed transactions whose marker is not yet below the high watermark: until then a
        # new leader could lose the marker, so their data stays out of read_committed reads.
        self._unreplicated: list[CompletedTxn] = []
        self._last_map_offset = last_map_offset
        self._generation = 0

    # ------------------------------------------------------------------ reading

    @property
    def last_map_offset(self) -> int:
        """The next offset whose batch the state has not seen (where log replay resumes)."""
        return self._last_map_offset

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """Live entries by producer id (read-only by convention; copies are cheap to make)."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return dict(self._ongoing)

    def first_unstable_offset(self) -> int | None:
        """Smallest offset a read_committed reader may not see yet, or None when all is stable."""
        candidates = list(self._ongoing.values())
        candidates.extend(txn.first_offset for txn in self._unreplicated)
        return min(candidates) if candidates else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: read_committed fetches and ListOffsets(latest) stop here."""
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(first, high_watermark)

    def describe_producers(self) -> list[ProducerDescription]:
        return [
            ProducerDescription(
                producer_id=e.producer_id,
                producer_epoch=e.producer_epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=(
                    -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
                ),
            )
            for e in sorted(self._producers.values(), key=lambda e: e.producer_id)
        ]

    # ------------------------------------------------------------------ appending

    def validate_append(
        self,
        batches: Sequence[ProducerBatch],
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> PendingAppend | BatchMetadata:
        """Check the batches of one append in order; nothing changes until `complete_append`.

        Returns the cached metadata when the (first) batch is a client retry of a written batch,
        so the caller writes nothing and answers with those offsets. Raises
        `ProducerStateError` on a rule violation; the whole append must then be refused.
        """
        pending = PendingAppend(self._generation, {}, [], {}, self._last_map_offset)
        for batch in batches:
            pending.end_offset = max(pending.end_offset, batch.last_offset + 1)
            if batch.producer_id < 0:
                if batch.is_control or batch.is_transactional:
                    raise ProducerStateError(
                        "transactional or control batch without a producer id",
                        ErrorCode.INVALID_RECORD,
                    )
                continue
            staged = pending.entries.get(batch.producer_id)
            current = staged if staged is not None else self._producers.get(batch.producer_id)
            if origin is AppendOrigin.CLIENT and current is not None and not batch.is_control:
                duplicate = current.find_duplicate(batch)
                if duplicate is not None:
                    return duplicate
            if staged is not None:
                entry = staged
            elif current is not None:
                entry = current.copy()
            else:
                entry = ProducerStateEntry(batch.producer_id)
            if batch.is_control:
                self._validate_marker(batch, entry, current is None, origin)
                pending.completed.append(self._apply_marker(batch, entry))
                pending.began.pop(batch.producer_id, None)
                entry.last_seen_ms = max(entry.last_seen_ms, now_ms)
            else:
                self._validate_data(batch, entry, current is None, origin)
                if self._apply_data(batch, entry, now_ms):
                    pending.began[batch.producer_id] = batch.base_offset
            pending.entries[batch.producer_id] = entry
        return pending

    def complete_append(self, pending: PendingAppend) -> UpdateResult:
        """Commit a `PendingAppend` once its batches are in the log."""
        if pending.generation != self._generation:
            raise RuntimeError("stale PendingAppend: the producer state changed since validation")
        self._generation += 1
        completed_ids = {txn.producer_id for txn in pending.completed}
        for producer_id in completed_ids:
            self._ongoing.pop(producer_id, None)
        self._producers.update(pending.entries)
        self._ongoing.update(pending.began)
        aborted: list[AbortedTxn] = []
        for txn in pending.completed:
            self._unreplicated.append(txn)
            if txn.is_aborted:
                aborted.append(
                    AbortedTxn(
                        txn.producer_id,
                        txn.first_offset,
                        txn.last_offset,
                        self._stable_offset_after(txn),
                    )
                )
        self._last_map_offset = max(self._last_map_offset, pending.end_offset)
        return UpdateResult(None, tuple(pending.completed), tuple(aborted))

    def check_and_update(
        self,
        batch: ProducerBatch,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> UpdateResult:
        """Validate and commit one batch (the caller appends it to the log in between or not at
        all when the result is a duplicate). Raises `ProducerStateError` on a rule violation."""
        pending = self.validate_append([batch], now_ms, origin)
        if isinstance(pending, BatchMetadata):
            return UpdateResult(duplicate=pending)
        return self.complete_append(pending)

    def append_replicated(self, batches: Sequence[ProducerBatch], now_ms: int) -> UpdateResult:
        """A follower appended the leader's batches (checked there): one staged update for
        all of them, through the same rules with the client checks off (origin REPLICATION)."""
        pending = self.validate_append(batches, now_ms, AppendOrigin.REPLICATION)
        if isinstance(pending, BatchMetadata):  # only client batches are duplicates
            raise AssertionError("a replicated append was taken for a duplicate")
        return self.complete_append(pending)

    def replay(self, batches: Iterable[ProducerBatch]) -> list[UpdateResult]:
        """Rebuild from the log tail: the live update path with checks meant for clients off."""
        results = []
        for batch in batches:
            if batch.last_offset < self._last_map_offset:
                continue  # already covered by the snapshot
            ts = max(batch.max_timestamp, 0)
            results.append(self.check_and_update(batch, ts, AppendOrigin.LOG))
        return results

    def update_map_end_offset(self, offset: int) -> None:
        """The log below `offset` has been seen, batches without a producer id included (a
        follower's replicated appends, the end of a rebuild): replay and snapshots resume there
        (Kafka's `updateMapEndOffset`)."""
        self._last_map_offset = max(self._last_map_offset, offset)

    # ------------------------------------------------------------------ rules

    @staticmethod
    def _validate_data(
        batch: ProducerBatch,
        entry: ProducerStateEntry,
        unknown: bool,
        origin: AppendOrigin,
    ) -> None:
        if origin in _TRUSTED:
            return
        if origin is not AppendOrigin.CLIENT:
            raise ProducerStateError("only clients write data batches", ErrorCode.INVALID_RECORD)
        pid, epoch, seq = batch.producer_id, batch.producer_epoch, batch.base_sequence
        if unknown:
            if seq != 0:
                raise ProducerStateError(
                    f"no state for producer {pid} (never seen or expired); "
                    f"its first batch has sequence {seq}, not 0",
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                )
        elif epoch < entry.producer_epoch:
            raise ProducerStateError(
                f"producer {pid} epoch {epoch} is older than the current {entry.producer_epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        elif epoch > entry.producer_epoch:
            if seq != 0:
                raise ProducerStateError(
                    f"producer {pid} new epoch {epoch} must start at sequence 0, got {seq}",
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                )
        elif not in_sequence(entry.last_seq, seq):
            raise ProducerStateError(
                f"producer {pid} epoch {epoch}: sequence {seq} does not follow {entry.last_seq}",
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            )
        if not batch.is_transactional and entry.current_txn_first_offset is not None:
            raise ProducerStateError(
                f"producer {pid} sent a non-transactional batch inside an open transaction",
                ErrorCode.INVALID_TXN_STATE,
            )

    @staticmethod
    def _validate_marker(
        batch: ProducerBatch,
        entry: ProducerStateEntry,
        unknown: bool,
        origin: AppendOrigin,
    ) -> None:
        if not batch.is_transactional:
            raise ProducerStateError(
                "a control batch must be transactional", ErrorCode.INVALID_RECORD
            )
        if origin in _TRUSTED:
            return
        if origin is AppendOrigin.CLIENT:
            raise ProducerStateError(
                "clients cannot write control batches", ErrorCode.INVALID_RECORD
            )
        if unknown:
            return
        if batch.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                f"marker epoch {batch.producer_epoch} for producer {batch.producer_id} is older "
                f"than the current {entry.producer_epoch}",
                ErrorCode.INVALID_PRODUCER_EPOCH,
            )
        if batch.coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                f"marker from coordinator epoch {batch.coordinator_epoch}, but "
                f"{entry.coordinator_epoch} already wrote for producer {batch.producer_id}",
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            )

    @staticmethod
    def _apply_data(batch: ProducerBatch, entry: ProducerStateEntry, now_ms: int) -> bool:
        """Update `entry`; True when this batch opened a transaction."""
        if batch.producer_epoch > entry.producer_epoch:
            entry._bump_epoch(batch.producer_epoch)
        elif batch.base_sequence == 0 and not in_sequence(entry.last_seq, 0):
            entry._start_over()
        timestamp = batch.max_timestamp if batch.max_timestamp >= 0 else now_ms
        entry._add_batch(
            BatchMetadata(
                batch.base_sequence,
                batch.last_sequence,
                batch.base_offset,
                batch.last_offset,
                timestamp,
            )
        )
        entry.last_timestamp = timestamp
        entry.last_seen_ms = max(entry.last_seen_ms, now_ms)
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = batch.base_offset
            return True
        return False

    @staticmethod
    def _apply_marker(batch: ProducerBatch, entry: ProducerStateEntry) -> CompletedTxn:
        # KIP-890 (transactions v2) writes markers with the bumped epoch: adopting it here is what
        # fences a delayed write of the finished transaction.
        if batch.producer_epoch > entry.producer_epoch:
            entry._bump_epoch(batch.producer_epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, batch.coordinator_epoch)
        if batch.max_timestamp >= 0:
            entry.last_timestamp = batch.max_timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = None
        return CompletedTxn(
            batch.producer_id,
            batch.base_offset if first is None else first,
            batch.base_offset,
            batch.control is ControlType.ABORT,
        )

    def _stable_offset_after(self, txn: CompletedTxn) -> int:
        others = [off for pid, off in self._ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    # ------------------------------------------------------------------ maintenance

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is now replicated (below the HW)."""
        self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Drop entries the broker has not seen for `producer_id_expiration_ms` (by its clock,
        `last_seen_ms`) with no open transaction: Kafka's periodic sweep."""
        expired = [
            pid
            for pid, e in self._producers.items()
            if e.current_txn_first_offset is None
            and now_ms - e.last_seen_ms >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        if expired:
            self._generation += 1
        return expired

    def truncate_head(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start: producer state survives it (so a
        retry after retention is still recognised); only replication bookkeeping is trimmed."""
        self._unreplicated = [t for t in self._unreplicated if t.last_offset >= log_start_offset]
        self._last_map_offset = max(self._last_map_offset, log_start_offset)
        self._generation += 1

    # ------------------------------------------------------------------ snapshots

    def export_snapshot(self) -> ProducerSnapshot:
        """The whole state as plain values (encode with `snapshot.encode_snapshot`)."""
        return ProducerSnapshot(
            self._last_map_offset,
            tuple(e.copy() for _, e in sorted(self._producers.items())),
            tuple(self._unreplicated),
        )

    @classmethod
    def from_snapshot(
        cls,
        snapshot: ProducerSnapshot,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> ProducerStateManager:
        """Rebuild from a snapshot; then `replay` the batch headers from `last_map_offset` on."""
        mgr = cls(
            producer_id_expiration_ms=producer_id_expiration_ms,
            last_map_offset=snapshot.last_map_offset,
        )
        for entry in snapshot.entries:
            copy = entry.copy()
            copy.last_seen_ms = max(copy.last_seen_ms, copy.last_timestamp)
            mgr._producers[copy.producer_id] = copy
            if copy.current_txn_first_offset is not None:
                mgr._ongoing[copy.producer_id] = copy.current_txn_first_offset
        mgr._unreplicated = list(snapshot.unreplicated)
        return mgr
