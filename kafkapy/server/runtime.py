"""The broker layer's runtime port (`kafkapy.broker.runtime.Runtime`) over trio.

Installed when `kafkapy.server` is imported: every path that runs a listener, a node or a test
broker imports this package first, so the broker layer's waits are trio's by the time any runs.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, cast

import trio

from kafkapy.broker import runtime

__all__ = ["TrioRuntime", "install"]

T = TypeVar("T")


class TrioRuntime:
    """`Runtime` as trio's own functions: no wrapper objects, trio's types satisfy the port.

    The clock, sleeps, events and deadlines are trio's callables themselves (class attributes,
    not methods that call them): Fetch's long poll and acks=all read the clock per request, and
    the port adds no call frame there."""

    current_time = staticmethod(trio.current_time)
    sleep = staticmethod(trio.sleep)
    event = staticmethod(trio.Event)

    def move_on_after(self, seconds: float, *, shield: bool = False) -> runtime.CancelScope:
        return trio.move_on_after(seconds, shield=shield)

    move_on_at = staticmethod(trio.move_on_at)

    def task_group(self) -> AbstractAsyncContextManager[runtime.TaskGroup]:
        return trio.open_nursery()

    async def run_sync_in_thread(
        self, fn: Callable[..., T], *args: Any, limiter: runtime.ThreadLimiter | None = None,
        abandon_on_cancel: bool = False,
    ) -> T:
        # only `thread_limiter` makes the limiters passed here: trio's own
        return await trio.to_thread.run_sync(fn, *args, limiter=cast("trio.CapacityLimiter | None", limiter),
                                             abandon_on_cancel=abandon_on_cancel)

    def thread_limiter(self, total: int) -> runtime.ThreadLimiter:
        return trio.CapacityLimiter(total)


def install() -> None:
    """Make trio the broker layer's runtime."""
    runtime.install(TrioRuntime())
