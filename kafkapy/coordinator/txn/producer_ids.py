"""Producer-id allocation in blocks, unique across restarts.

Why blocks: persisting every id would cost a `__transaction_state` write per InitProducerId;
reserving `block_size` ids per write makes that one write per thousand. Uniqueness across restarts
comes from the rule that a restarted coordinator never hands out ids from a block it loaded: ids
of the last reserved block may already be in use, so `finish_loading` skips to the next block
(wasting at most one block per restart, which int64 makes irrelevant).

The counter inside a block is the one piece of coordinator state not written as a record; it is
safe because of that rule. A later cluster-wide version reserves blocks through the controller
(Kafka's AllocateProducerIds) with the same interface.
"""

from __future__ import annotations

from kafkapy.coordinator.txn.records import ProducerIdBlock

__all__ = ["DEFAULT_PRODUCER_ID_BLOCK_SIZE", "ProducerIdBlockAllocator"]

DEFAULT_PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdBlockAllocator:
    """Hands out producer ids; `allocate` says when a new block must be persisted first."""

    def __init__(self, block_size: int = DEFAULT_PRODUCER_ID_BLOCK_SIZE) -> None:
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        self.block_size = block_size
        self._reserved_until = 0  # ids below are reserved by a persisted block record
        self._next = 0

    @property
    def reserved_until(self) -> int:
        return self._reserved_until

    def allocate(self) -> tuple[int, ProducerIdBlock | None]:
        """Next id, plus the block record to persist when the current block is used up.

        When a block is returned the caller must write and replay it before it answers with the
        id (and before the next allocation); if the write fails the id was never given out.
        """
        if self._next < self._reserved_until:
            pid = self._next
            self._next += 1
            return pid, None
        start = self._reserved_until
        self._next = start + 1
        return start, ProducerIdBlock(start + self.block_size, self.block_size)

    def replay(self, block: ProducerIdBlock) -> None:
        """Apply a persisted reservation (live or while loading)."""
        self._reserved_until = max(self._reserved_until, block.next_block_start)
        self._next = max(self._next, block.next_block_start - block.block_size)

    def finish_loading(self) -> None:
        """After loading: never reuse an id of the last loaded block (it may be in use)."""
        self._next = self._reserved_until
