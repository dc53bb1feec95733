"""The transaction coordinator: a plain state machine over `__transaction_state` records.

Rules:

1. Operations never change state. Each returns a `CoordinatorResult`: the records to append to
   `__transaction_state`, the response, and marker-writing actions. State changes only in
   `replay(key, value)`, the same path that loads the topic at start (Kafka's coordinator runtime
   model). The runtime must, for one operation at a time: append the records, replay them, then
   send the response and run the actions. If the append fails it answers the operation's
   `error_on_write_failure` instead (records of a failed write are never replayed).
2. Time is injected (`now_ms`); nothing here reads a clock.
3. Every emitted metadata record passes `check_transition` (the `VALID_PREVIOUS_STATES` table).
4. Markers: a `WriteTxnMarkers` action lists the partitions that get a control batch (commit or
   abort) with the given producer id/epoch and coordinator epoch, including the
   `__consumer_offsets` partition of groups added with AddOffsetsToTxn. When all are written the
   runtime calls `complete_markers`, which moves PrepareCommit/PrepareAbort to Complete*.
5. Transactions v1 (EndTxn v0-4) keep the epoch across transactions; v2 (EndTxn v5+, KIP-890)
   bump it on every commit/abort and the markers carry the bumped epoch, which fences any delayed
   write or EndTxn of the finished transaction. See docs/transactions.md.
6. A new incarnation (InitProducerId) or the transaction timeout aborts an ongoing transaction by
   bumping the epoch (PrepareEpochFence) and aborting with that epoch in the same write.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kafkapy.coordinator.txn.partitioning import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    DEFAULT_TRANSACTION_STATE_PARTITIONS,
    OFFSETS_TOPIC,
    partition_for,
)
from kafkapy.coordinator.txn.producer_ids import (
    DEFAULT_PRODUCER_ID_BLOCK_SIZE,
    ProducerIdBlockAllocator,
)
from kafkapy.coordinator.txn.records import (
    ProducerIdBlock,
    RecordKeyType,
    decode_key,
    decode_metadata_value,
    decode_producer_id_block_value,
    encode_metadata_key,
    encode_metadata_value,
    encode_producer_id_block_key,
    encode_producer_id_block_value,
)
from kafkapy.coordinator.txn.results import (
    AddPartitionsTxn,
    CoordinatorResult,
    EndTxnResult,
    InitProducerIdResult,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnLogRecord,
    WriteTxnMarkers,
)
from kafkapy.coordinator.txn.state import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    check_transition,
    is_epoch_exhausted,
)
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "OFFSETS_TOPIC",
    "AddPartitionsTxn",
    "CoordinatorResult",
    "EndTxnResult",
    "InitProducerIdResult",
    "ListTransactionsResult",
    "TransactionCoordinator",
    "TransactionDescription",
    "TransactionListing",
    "TxnLogRecord",
    "WriteTxnMarkers",
]

#: `transaction.max.timeout.ms` default (15 minutes).
DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000
#: `transactional.id.expiration.ms` default (7 days).
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000

T = TypeVar("T")
_S = TxnState
_PREPARE = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE})
_COMPLETE_OR_EMPTY = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})


@dataclass(slots=True)
class _Staged:
    records: list[TxnLogRecord] = field(default_factory=list)
    markers: list[WriteTxnMarkers] = field(default_factory=list)


class TransactionCoordinator:
    """Transaction state of every transactional id in the `__transaction_state` partitions this
    broker leads. Single-owner: the runtime serialises operations (rule 1)."""

    def __init__(
        self,
        *,
        coordinator_epoch: int = 0,
        num_partitions: int = DEFAULT_TRANSACTION_STATE_PARTITIONS,
        offsets_topic_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS,
        max_transaction_timeout_ms: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
        producer_id_block_size: int = DEFAULT_PRODUCER_ID_BLOCK_SIZE,
        allocate_producer_id: Callable[[], int] | None = None,
    ) -> None:
        """`allocate_producer_id`: an outside source of producer ids (the broker's, which also
        serves idempotent producers, so both kinds share one id space); then no producer-id
        block records are written and the internal allocator is unused."""
        self.coordinator_epoch = coordinator_epoch
        self.num_partitions = num_partitions
        self.offsets_topic_partitions = offsets_topic_partitions
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.transactional_id_expiration_ms = transactional_id_expiration_ms
        self._producer_ids = ProducerIdBlockAllocator(producer_id_block_size)
        self._external_ids = allocate_producer_id
        self._txns: dict[str, TransactionMetadata] = {}

    # ------------------------------------------------------------------ state access

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        """Current metadata by transactional id (values are immutable)."""
        return self._txns

    @property
    def producer_id_watermark(self) -> int:
        return self._producer_ids.reserved_until

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    # ------------------------------------------------------------------ replay

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one `__transaction_state` record (live, or while loading the topic)."""
        key_type, tid = decode_key(key)
        if key_type is RecordKeyType.PRODUCER_ID_BLOCK:
            if value is not None:
                self._producer_ids.replay(decode_producer_id_block_value(value))
            return
        assert tid is not None
        if value is None:
            self._txns.pop(tid, None)
        else:
            self._txns[tid] = decode_metadata_value(tid, value)

    def load_complete(self, now_ms: int) -> CoordinatorResult[None]:
        """After loading: finish what a crash interrupted (resend markers of Prepare* states,
        abort a fenced transaction) and stop reusing the last loaded producer-id block."""
        self._producer_ids.finish_loading()
        staged = _Staged()
        for md in sorted(self._txns.values(), key=lambda m: m.transactional_id):
            if md.state is _S.PREPARE_EPOCH_FENCE:
                aborting = self._prepare(md, commit=False, now_ms=now_ms)
                self._stage(staged, md, aborting)
                staged.markers.append(self._markers(aborting))
            elif md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                staged.markers.append(self._markers(md))
        return self._result(staged, None)

    def unload_partition(self, partition: int) -> None:
        """This broker stopped leading a `__transaction_state` partition: forget its ids."""
        for tid in [t for t in self._txns if self.partition_for(t) == partition]:
            del self._txns[tid]

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(
        self,
        transactional_id: str | None,
        transaction_timeout_ms: int,
        now_ms: int,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> CoordinatorResult[InitProducerIdResult]:
        """InitProducerId (all versions). Without a transactional id: a fresh producer id for an
        idempotent producer. With one: the id's producer id and a bumped epoch, fencing older
        incarnations; `producer_id`/`producer_epoch` (v3+) let a live producer bump its own
        epoch after an abortable error, and recognise a retry of that request."""
        staged = _Staged()
        if transactional_id is None:
            pid = self._allocate(staged)
            return self._result(staged, InitProducerIdResult(ErrorCode.NONE, pid, 0))
        if transactional_id == "":
            return self._result(staged, InitProducerIdResult(ErrorCode.INVALID_REQUEST))
        if not 0 < transaction_timeout_ms <= self.max_transaction_timeout_ms:
            return self._result(staged, InitProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
        if (producer_id == -1) != (producer_epoch == -1):
            return self._result(staged, InitProducerIdResult(ErrorCode.INVALID_REQUEST))
        md = self._txns.get(transactional_id)
        if md is None:
            pid = self._allocate(staged)
            new = TransactionMetadata(
                transactional_id=transactional_id,
                producer_id=pid,
                producer_epoch=0,
                txn_timeout_ms=transaction_timeout_ms,
                state=_S.EMPTY,
                txn_last_update_timestamp=now_ms,
            )
            self._stage(staged, None, new)
            return self._result(staged, InitProducerIdResult(ErrorCode.NONE, pid, 0))
        result = self._reinit_producer_id(
            staged, md, producer_id, producer_epoch, transaction_timeout_ms, now_ms
        )
        return self._result(staged, result)

    def _reinit_producer_id(
        self,
        staged: _Staged,
        md: TransactionMetadata,
        producer_id: int,
        producer_epoch: int,
        transaction_timeout_ms: int,
        now_ms: int,
    ) -> InitProducerIdResult:
        """InitProducerId for a transactional id already known: a producer naming its own
        id/epoch (v3+) must be the current incarnation (or retrying the last bump), a
        transaction in flight ends first (a running one is aborted under a bumped epoch), then
        the epoch is bumped, or a fresh producer id taken once the epoch is exhausted."""
        expected = (producer_id, producer_epoch) if producer_id != -1 else None
        is_retry = expected is not None and expected == (
            md.last_producer_id,
            md.last_producer_epoch,
        )
        current = {(md.producer_id, md.producer_epoch), md.client_identity()}
        if expected is not None and not is_retry and expected not in current:
            known_ids = (md.producer_id, md.last_producer_id, md.next_producer_id)
            error = (
                ErrorCode.PRODUCER_FENCED
                if producer_id in known_ids
                else ErrorCode.INVALID_PRODUCER_ID_MAPPING
            )
            return InitProducerIdResult(error)
        if md.state in _PREPARE:
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state is _S.ONGOING:
            # the previous incarnation's transaction is aborted under a bumped epoch; the new
            # producer retries (CONCURRENT_TRANSACTIONS) until the abort completed
            self._fence_and_abort(staged, md, now_ms)
            return InitProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if is_retry and md.state is _S.EMPTY:
            return InitProducerIdResult(ErrorCode.NONE, md.producer_id, md.producer_epoch)
        if is_epoch_exhausted(md.producer_epoch):
            pid, epoch = self._allocate(staged), 0
        else:
            pid, epoch = md.producer_id, md.producer_epoch + 1
        new = replace(
            md,
            producer_id=pid,
            producer_epoch=epoch,
            last_producer_id=md.producer_id,
            last_producer_epoch=md.producer_epoch,
            next_producer_id=NO_PRODUCER_ID,
            txn_timeout_ms=transaction_timeout_ms,
            state=_S.EMPTY,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now_ms,
        )
        self._stage(staged, md, new)
        return InitProducerIdResult(ErrorCode.NONE, pid, epoch)

    # ------------------------------------------------------------------ AddPartitions / Offsets

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
        *,
        verify_only: bool = False,
        transaction_version: int = 1,
    ) -> CoordinatorResult[dict[TopicPartition, ErrorCode]]:
        """AddPartitionsToTxn v0-3 (client form), or one transaction of the v4+ broker form.

        `verify_only` (KIP-890 part 1): the partition leader asks, before accepting the first
        transactional write, whether the partition is in the ongoing transaction; nothing is
        written. Otherwise the partitions join the transaction (v2 brokers add implicitly this
        way, with `transaction_version=2`)."""
        staged = _Staged()
        parts = frozenset(TopicPartition(*tp) for tp in partitions)
        errors = self._add(
            staged,
            transactional_id,
            producer_id,
            producer_epoch,
            parts,
            now_ms,
            verify_only,
            transaction_version,
        )
        return self._result(staged, errors)

    def add_partitions_batch(
        self, transactions: Sequence[AddPartitionsTxn], now_ms: int
    ) -> CoordinatorResult[dict[str, dict[TopicPartition, ErrorCode]]]:
        """AddPartitionsToTxn v4+: several transactions, each answered on its own. A
        transactional id listed twice is answered INVALID_REQUEST for all its partitions."""
        staged = _Staged()
        counts = Counter(txn.transactional_id for txn in transactions)
        results: dict[str, dict[TopicPartition, ErrorCode]] = {}
        for txn in transactions:
            parts = frozenset(TopicPartition(*tp) for tp in txn.partitions)
            if counts[txn.transactional_id] > 1:
                merged = results.setdefault(txn.transactional_id, {})
                merged.update(dict.fromkeys(parts, ErrorCode.INVALID_REQUEST))
                continue
            results[txn.transactional_id] = self._add(
                staged,
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                parts,
                now_ms,
                txn.verify_only,
                2,
            )
        return self._result(staged, results)

    def add_offsets(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        now_ms: int,
    ) -> CoordinatorResult[ErrorCode]:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so
        the marker makes its TxnOffsetCommit offsets visible (or drops them)."""
        tp = TopicPartition(OFFSETS_TOPIC, partition_for(group_id, self.offsets_topic_partitions))
        staged = _Staged()
        errors = self._add(
            staged, transactional_id, producer_id, producer_epoch, frozenset({tp}), now_ms, False, 1
        )
        return self._result(staged, errors[tp])

    def _add(
        self,
        staged: _Staged,
        tid: str,
        producer_id: int,
        producer_epoch: int,
        parts: frozenset[TopicPartition],
        now_ms: int,
        verify_only: bool,
        transaction_version: int,
    ) -> dict[TopicPartition, ErrorCode]:
        md = self._txns.get(tid)
        error = self._check_identity(md, tid, producer_id, producer_epoch)
        if error is not ErrorCode.NONE:
            return dict.fromkeys(parts, error)
        assert md is not None
        if verify_only:
            return {
                tp: ErrorCode.NONE
                if md.state is _S.ONGOING and tp in md.partitions
                else ErrorCode.INVALID_TXN_STATE
                for tp in parts
            }
        if md.state in _PREPARE:
            return dict.fromkeys(parts, ErrorCode.CONCURRENT_TRANSACTIONS)
        if not parts or (md.state is _S.ONGOING and parts <= md.partitions):
            return dict.fromkeys(parts, ErrorCode.NONE)
        new = replace(
            md,
            state=_S.ONGOING,
            partitions=md.partitions | parts,
            txn_start_timestamp=md.txn_start_timestamp if md.state is _S.ONGOING else now_ms,
            txn_last_update_timestamp=now_ms,
            transaction_version=(
                md.transaction_version if md.state is _S.ONGOING else transaction_version
            ),
        )
        self._stage(staged, md, new)
        return dict.fromkeys(parts, ErrorCode.NONE)

    # ------------------------------------------------------------------ EndTxn

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
        *,
        transaction_version: int = 1,
    ) -> CoordinatorResult[EndTxnResult]:
        """EndTxn. `transaction_version=2` for EndTxn v5+ (KIP-890): the epoch is bumped by every
        commit/abort (a new producer id if it ran out), the answer carries the new identity, a
        retry with the pre-bump identity is answered again, and aborting a transaction the
        coordinator has no partitions for is allowed. The answer is sent once the Prepare*
        record is written; markers follow asynchronously (as in Kafka)."""
        staged = _Staged()
        md = self._txns.get(transactional_id)
        v2 = transaction_version >= 2
        if (
            md is not None
            and v2
            and self._is_end_txn_retry(md, producer_id, producer_epoch, committed)
        ):
            pid, epoch = md.client_identity()
            return self._result(staged, EndTxnResult(ErrorCode.NONE, pid, epoch))
        error = self._check_identity(md, transactional_id, producer_id, producer_epoch)
        if error is not ErrorCode.NONE:
            return self._result(staged, EndTxnResult(error))
        assert md is not None
        state = md.state
        if state is _S.ONGOING or (v2 and not committed and state in _COMPLETE_OR_EMPTY):
            new = self._prepare(md, committed, now_ms, bump=v2, staged=staged)
            self._stage(staged, md, new)
            if new.partitions:
                staged.markers.append(self._markers(new))
            else:
                # nothing to mark: complete in the same write
                self._stage(staged, new, self._complete(new, now_ms))
            pid, epoch = new.client_identity()
            return self._result(staged, EndTxnResult(ErrorCode.NONE, pid, epoch))
        if state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT):
            matches = committed == (state in (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT))
            if not matches:
                error = ErrorCode.INVALID_TXN_STATE
            elif state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS  # v1 retry while markers are written
            else:
                error = ErrorCode.NONE  # v1 retry after completion
            if v2 and error is ErrorCode.NONE:
                # v2 commits bump the epoch, so a same-epoch "retry" is a new, empty commit
                error = ErrorCode.INVALID_TXN_STATE
            pid, epoch = md.client_identity()
            return self._result(staged, EndTxnResult(error, pid, epoch))
        if state is _S.PREPARE_EPOCH_FENCE:
            return self._result(staged, EndTxnResult(ErrorCode.CONCURRENT_TRANSACTIONS))
        return self._result(staged, EndTxnResult(ErrorCode.INVALID_TXN_STATE))

    @staticmethod
    def _is_end_txn_retry(
        md: TransactionMetadata, producer_id: int, producer_epoch: int, committed: bool
    ) -> bool:
        if (producer_id, producer_epoch) != (md.last_producer_id, md.last_producer_epoch):
            return False
        if md.transaction_version < 2:
            return False
        done = (
            (_S.PREPARE_COMMIT, _S.COMPLETE_COMMIT)
            if committed
            else (_S.PREPARE_ABORT, _S.COMPLETE_ABORT)
        )
        return md.state in done

    # ------------------------------------------------------------------ markers

    def complete_markers(
        self, transactional_id: str, producer_id: int, producer_epoch: int, now_ms: int
    ) -> CoordinatorResult[ErrorCode]:
        """All markers of a `WriteTxnMarkers` action are written: Prepare* -> Complete*.
        A stale call (the transaction moved on, e.g. after a reload) changes nothing and answers
        INVALID_TXN_STATE."""
        staged = _Staged()
        md = self._txns.get(transactional_id)
        if (
            md is None
            or md.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
            or (md.producer_id, md.producer_epoch) != (producer_id, producer_epoch)
        ):
            return self._result(staged, ErrorCode.INVALID_TXN_STATE)
        self._stage(staged, md, self._complete(md, now_ms))
        return self._result(staged, ErrorCode.NONE)

    def pending_markers(self) -> list[WriteTxnMarkers]:
        """Marker actions still outstanding (for a runtime that retries failed writes)."""
        return [
            self._markers(md)
            for md in sorted(self._txns.values(), key=lambda m: m.transactional_id)
            if md.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
        ]

    # ------------------------------------------------------------------ timers

    def abort_timed_out_transactions(self, now_ms: int) -> CoordinatorResult[list[str]]:
        """Abort (and fence) every Ongoing transaction older than its timeout."""
        staged = _Staged()
        aborted = []
        for md in sorted(self._txns.values(), key=lambda m: m.transactional_id):
            if md.state is _S.ONGOING and md.txn_start_timestamp + md.txn_timeout_ms < now_ms:
                self._fence_and_abort(staged, md, now_ms)
                aborted.append(md.transactional_id)
        return self._result(staged, aborted)

    def expire_transactional_ids(self, now_ms: int) -> CoordinatorResult[list[str]]:
        """Tombstone ids idle for `transactional.id.expiration.ms` with no transaction running
        (they become Dead: the next InitProducerId starts afresh with a new producer id)."""
        staged = _Staged()
        expired = []
        for md in sorted(self._txns.values(), key=lambda m: m.transactional_id):
            idle = now_ms - md.txn_last_update_timestamp >= self.transactional_id_expiration_ms
            if md.state in _COMPLETE_OR_EMPTY and idle:
                check_transition(md.state, _S.DEAD)
                staged.records.append(
                    TxnLogRecord(
                        self.partition_for(md.transactional_id),
                        encode_metadata_key(md.transactional_id),
                        None,
                    )
                )
                expired.append(md.transactional_id)
        return self._result(staged, expired)

    # ------------------------------------------------------------------ describe / list

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> list[TransactionDescription]:
        out = []
        for tid in transactional_ids:
            md = self._txns.get(tid)
            if md is None:
                out.append(TransactionDescription(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
                continue
            out.append(
                TransactionDescription(
                    tid,
                    ErrorCode.NONE,
                    md.state.value,
                    md.txn_timeout_ms,
                    md.txn_start_timestamp,
                    md.producer_id,
                    md.producer_epoch,
                    tuple(sorted(md.partitions)),
                )
            )
        return out

    def list_transactions(
        self,
        now_ms: int,
        *,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> ListTransactionsResult:
        """ListTransactions: filters combine with AND; an empty filter matches all. Unknown state
        names are echoed back in `unknown_state_filters` and otherwise ignored, as Kafka does.
        The duration filter keeps transactions running longer than it (started ones only)."""
        known = {s.value: s for s in TxnState}
        wanted = set()
        unknown = []
        for name in state_filters:
            if name in known:
                wanted.add(known[name])
            else:
                unknown.append(name)
        pids = set(producer_id_filters)
        rows = []
        for md in sorted(self._txns.values(), key=lambda m: m.transactional_id):
            if wanted and md.state not in wanted:
                continue
            if pids and md.producer_id not in pids:
                continue
            if duration_filter_ms >= 0 and (
                md.txn_start_timestamp < 0 or now_ms - md.txn_start_timestamp <= duration_filter_ms
            ):
                continue
            rows.append(TransactionListing(md.transactional_id, md.producer_id, md.state.value))
        return ListTransactionsResult(tuple(unknown), tuple(rows))

    # ------------------------------------------------------------------ helpers

    def _check_identity(
        self, md: TransactionMetadata | None, tid: str, producer_id: int, producer_epoch: int
    ) -> ErrorCode:
        if not tid:
            return ErrorCode.INVALID_REQUEST
        if md is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        # while a v2 commit that ran out of epochs completes, the client already holds the new id
        pid, epoch = md.client_identity()
        if pid != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    def _allocate(self, staged: _Staged) -> int:
        if self._external_ids is not None:
            return self._external_ids()
        pid, block = self._producer_ids.allocate()
        if block is not None:
            staged.records.append(self._block_record(block))
        return pid

    @staticmethod
    def _block_record(block: ProducerIdBlock) -> TxnLogRecord:
        return TxnLogRecord(
            0, encode_producer_id_block_key(), encode_producer_id_block_value(block)
        )

    def _prepare(
        self,
        md: TransactionMetadata,
        commit: bool,
        now_ms: int,
        *,
        bump: bool = False,
        staged: _Staged | None = None,
    ) -> TransactionMetadata:
        """The Prepare* value; with `bump` (v2) the epoch grows, or a new producer id is
        allocated for the client when the epoch is exhausted (the markers still use the old id
        with the last epoch)."""
        state = _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT
        if not bump:
            return replace(md, state=state, txn_last_update_timestamp=now_ms)
        next_pid = NO_PRODUCER_ID
        if is_epoch_exhausted(md.producer_epoch) and staged is not None:
            next_pid = self._allocate(staged)
        return replace(
            md,
            state=state,
            txn_last_update_timestamp=now_ms,
            last_producer_id=md.producer_id,
            last_producer_epoch=md.producer_epoch,
            producer_epoch=min(md.producer_epoch + 1, MAX_PRODUCER_EPOCH),
            next_producer_id=next_pid,
            transaction_version=2,
        )

    @staticmethod
    def _complete(md: TransactionMetadata, now_ms: int) -> TransactionMetadata:
        state = _S.COMPLETE_COMMIT if md.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        if md.next_producer_id != NO_PRODUCER_ID:
            return replace(
                md,
                state=state,
                partitions=frozenset(),
                txn_last_update_timestamp=now_ms,
                producer_id=md.next_producer_id,
                producer_epoch=0,
                next_producer_id=NO_PRODUCER_ID,
            )
        return replace(md, state=state, partitions=frozenset(), txn_last_update_timestamp=now_ms)

    def _fence_and_abort(self, staged: _Staged, md: TransactionMetadata, now_ms: int) -> None:
        fenced = replace(
            md,
            state=_S.PREPARE_EPOCH_FENCE,
            producer_epoch=min(md.producer_epoch + 1, MAX_PRODUCER_EPOCH),
            last_producer_id=NO_PRODUCER_ID,
            last_producer_epoch=-1,
            txn_last_update_timestamp=now_ms,
        )
        self._stage(staged, md, fenced)
        aborting = self._prepare(fenced, commit=False, now_ms=now_ms)
        self._stage(staged, fenced, aborting)
        staged.markers.append(self._markers(aborting))

    def _markers(self, md: TransactionMetadata) -> WriteTxnMarkers:
        return WriteTxnMarkers(
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            self.coordinator_epoch,
            md.state is _S.PREPARE_COMMIT,
            md.partitions,
        )

    def _stage(
        self, staged: _Staged, old: TransactionMetadata | None, new: TransactionMetadata
    ) -> None:
        check_transition(None if old is None else old.state, new.state)
        staged.records.append(
            TxnLogRecord(
                self.partition_for(new.transactional_id),
                encode_metadata_key(new.transactional_id),
                encode_metadata_value(new),
            )
        )

    @staticmethod
    def _result(staged: _Staged, response: T) -> CoordinatorResult[T]:
        return CoordinatorResult(tuple(staged.records), response, tuple(staged.markers))
