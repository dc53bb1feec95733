"""Transaction states, their legal predecessors, and the per-transactional-id metadata.

Rules:

1. Every state names the set of states it may follow (`VALID_PREVIOUS_STATES`); the coordinator
   checks it with `check_transition` before emitting any record, so an illegal transition is a
   bug that surfaces at once instead of a corrupt `__transaction_state`.
2. `TransactionMetadata` is an immutable value: an operation builds the next value, encodes it as
   a record, and only `replay` installs it. Equal values mean equal state, which is what the
   replay tests compare.
3. Staying in a state is legal where Kafka allows it (Empty -> Empty on an epoch bump, Ongoing ->
   Ongoing when partitions are added).

Transitions (the operation that causes each):

    (none)          -> Empty              InitProducerId for a new transactional id
    Empty           -> Empty              InitProducerId (epoch bump)
    Empty           -> Ongoing            AddPartitionsToTxn / AddOffsetsToTxn / implicit add (v2)
    Ongoing         -> Ongoing            more partitions added
    Ongoing         -> PrepareCommit      EndTxn(commit)
    Ongoing         -> PrepareAbort       EndTxn(abort)
    Ongoing         -> PrepareEpochFence  InitProducerId of a new incarnation, or the timeout
    PrepareEpochFence -> PrepareAbort     (same write) abort the fenced transaction
    Empty / CompleteCommit / CompleteAbort -> PrepareAbort   EndTxn v5+(abort) of an empty txn
    PrepareCommit   -> CompleteCommit     all markers written
    PrepareAbort    -> CompleteAbort      all markers written
    CompleteCommit / CompleteAbort -> Empty    InitProducerId (epoch bump)
    CompleteCommit / CompleteAbort -> Ongoing  next transaction's first AddPartitions
    Empty / CompleteCommit / CompleteAbort -> Dead  transactional id expired (tombstone)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "MAX_PRODUCER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "VALID_PREVIOUS_STATES",
    "IllegalTransitionError",
    "TopicPartition",
    "TransactionMetadata",
    "TxnState",
    "check_transition",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Epochs are int16 on the wire.
MAX_PRODUCER_EPOCH = 2**15 - 1


def is_epoch_exhausted(epoch: int) -> bool:
    """Whether a bump would leave no room for one more (the fence bump) - then a new producer id
    is allocated instead, as Kafka does at `Short.MaxValue - 1`."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class TxnState(enum.Enum):
    """Values are the names DescribeTransactions / ListTransactions put on the wire."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"

    @property
    def code(self) -> int:
        """Stable small integer for the record format (never reorder)."""
        return _STATE_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> TxnState:
        return _STATES_BY_CODE[code]


_STATE_CODES = {state: i for i, state in enumerate(TxnState)}
_STATES_BY_CODE = {i: state for state, i in _STATE_CODES.items()}

_S = TxnState
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    # Empty/Complete*: a v2 client may abort a transaction the coordinator never saw a partition
    # of (it adds partitions implicitly through the partition leaders).
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
}


class IllegalTransitionError(RuntimeError):
    """A coordinator bug: an operation tried a transition the table forbids."""


def check_transition(old: TxnState | None, new: TxnState) -> None:
    """Raise unless `old -> new` is in the table (`None` = the id had no metadata)."""
    if old is None:
        if new is not TxnState.EMPTY:
            raise IllegalTransitionError(
                f"a new transactional id must start Empty, not {new.value}"
            )
        return
    if old not in VALID_PREVIOUS_STATES[new]:
        raise IllegalTransitionError(f"illegal transaction transition {old.value} -> {new.value}")


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionMetadata:
    """Everything the coordinator knows about one transactional id.

    `last_producer_id`/`last_producer_epoch` are the identity the client used before the most
    recent bump, so a retried InitProducerId or EndTxn (v5+) is recognised and answered again
    instead of fencing the very producer that asked. `next_producer_id` is set while a v2 commit
    or abort whose epoch ran out is in flight: the client already got that id with epoch 0.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    next_producer_id: int = NO_PRODUCER_ID
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int
    transaction_version: int = 1

    def client_identity(self) -> tuple[int, int]:
        """The (producer id, epoch) the client holds after the last completed request."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch
