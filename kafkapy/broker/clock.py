"""The broker's wall clock, in a module of its own so every server part can read it without
importing the `Broker` (which owns the coordinator runtimes that read it too)."""

from __future__ import annotations

import time

from kafkapy.broker import runtime

__all__ = ["loop_ms", "now_ms", "quota_ms"]


def now_ms() -> int:
    """Wall-clock milliseconds: record timestamps and retention are wall-clock in Kafka."""
    return time.time_ns() // 1_000_000


def quota_ms() -> int:
    """Monotonic milliseconds for client quota sensors: a wall-clock step must not turn into a
    burst of throttling (or of free traffic)."""
    return time.monotonic_ns() // 1_000_000


def loop_ms() -> int:
    """The event loop's clock in milliseconds (monotonic; the autojump clock in tests): what the
    controller's broker sessions and the Raft driver's timers are measured on."""
    return int(runtime.get().current_time() * 1000)
