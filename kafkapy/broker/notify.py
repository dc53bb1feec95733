"""Wake-ups for long-poll fetches: appends wake the waiters of exactly their partition.

Why a per-waiter Event registered under each watched partition: a fetch watches many partitions
and must wake when *any* of them gets data, without polling or a task per partition. An append
sets the events registered for that partition (usually none: O(1)); the waiter unregisters on the
way out. `wake_all` lets shutdown end every long poll at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from kafkapy.broker import runtime

__all__ = ["PartitionWaiters"]

Key = tuple[str, int]


class PartitionWaiters:
    def __init__(self) -> None:
        self._waiters: dict[Key, set[runtime.Event]] = {}
        self._all: set[runtime.Event] = set()

    @contextmanager
    def watch(self, keys: Iterable[Key]) -> Iterator[runtime.Event]:
        """Yield an Event set by the next append to any of `keys` (or by `wake_all`)."""
        event = runtime.new_event()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(event)
        self._all.add(event)
        try:
            yield event
        finally:
            self._all.discard(event)
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiters[key]

    def notify(self, key: Key) -> None:
        waiting = self._waiters.get(key)
        if waiting:
            for event in waiting:
                event.set()

    def wake_all(self) -> None:
        for event in self._all:
            event.set()

    def waiting_count(self) -> int:
        return len(self._all)
