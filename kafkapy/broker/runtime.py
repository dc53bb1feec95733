"""The runtime port: how the broker layer waits, without naming the event loop that runs it.

Handlers and coordinator drivers are `async` (Fetch long-polls, acks=all waits for the ISR, the
coordinators load their partitions in worker threads), but what they wait with - events,
deadlines, sleeps, task groups, worker threads, the clock deadlines are read from - belongs to
the server layer, which runs trio. `Runtime` is that surface, kept to what the broker layer
uses; `kafkapy.server.runtime` implements it over trio and installs it when `kafkapy.server` is
imported (before any listener or driver runs).

Why a process-wide port and not a constructor argument: one process runs one event loop, and
the waits sit in dataclass defaults and hot paths (a Fetch's long poll) where threading an
object through every constructor buys nothing but a wider signature. `get()` is one global
read, no allocation per request.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol, TypeVar

__all__ = ["CancelScope", "Event", "Runtime", "TaskGroup", "ThreadLimiter", "get", "install", "new_event"]

T = TypeVar("T")


class Event(Protocol):
    """A one-shot flag tasks wait on (trio.Event)."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> None: ...


class CancelScope(Protocol):
    """A region of code cancelled at a deadline or on request (trio.CancelScope)."""

    @property
    def cancelled_caught(self) -> bool: ...

    def cancel(self) -> None: ...

    def __enter__(self) -> CancelScope: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None: ...


class TaskGroup(Protocol):
    """Tasks that all end before the group does (a trio nursery)."""

    @property
    def cancel_scope(self) -> CancelScope: ...

    def start_soon(self, fn: Callable[..., Any], *args: Any) -> None: ...


class ThreadLimiter(Protocol):
    """How many worker threads one kind of work may hold at once (trio.CapacityLimiter)."""

    @property
    def total_tokens(self) -> int | float: ...


class Runtime(Protocol):
    """What the broker layer needs of the event loop: time, waits, tasks and worker threads."""

    def current_time(self) -> float:
        """The loop's clock in seconds (deadlines are on this clock, not the wall clock)."""
        ...

    async def sleep(self, seconds: float) -> None: ...

    def event(self) -> Event: ...

    def move_on_after(self, seconds: float, *, shield: bool = False) -> CancelScope:
        """A scope that gives up waiting after `seconds` (shield: outer cancels wait for it)."""
        ...

    def move_on_at(self, deadline: float) -> CancelScope: ...

    def task_group(self) -> AbstractAsyncContextManager[TaskGroup]: ...

    async def run_sync_in_thread(
        self, fn: Callable[..., T], *args: Any, limiter: ThreadLimiter | None = None,
        abandon_on_cancel: bool = False,
    ) -> T:
        """`fn(*args)` in a worker thread (file work that must not stall the loop); within
        `limiter`'s threads when given, else the runtime's shared ones. `abandon_on_cancel`:
        a cancelled wait returns at once and the thread's result is dropped when it ends (a
        remote read past `remote.fetch.max.wait.ms`); the limiter's token is held until then."""
        ...

    def thread_limiter(self, total: int) -> ThreadLimiter:
        """A bound of its own for one kind of thread work (what it may hold in memory at once)."""
        ...


_runtime: Runtime | None = None


def install(runtime: Runtime) -> None:
    """Make `runtime` the one the broker layer waits with (the server layer does, on import)."""
    global _runtime
    _runtime = runtime


def get() -> Runtime:
    """The installed runtime; the broker layer cannot wait before the server layer installs one."""
    if _runtime is None:
        raise RuntimeError("no runtime installed: import kafkapy.server (it installs trio's)")
    return _runtime


def new_event() -> Event:
    """A fresh event of the installed runtime (a dataclass field's default factory)."""
    return get().event()
