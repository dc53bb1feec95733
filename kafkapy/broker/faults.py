"""Request-level fault injection for tests: fail, drop or delay the next requests of an API key.

Why at the broker: a fault injected where requests are dispatched reaches every client library
alike (librdkafka, kafka-python, the Java client) without a proxy or a mocked client - the
client sees a real error code, a real disconnect or a real slow answer (the idea of franz-go's
kfake `ControlKey`). Off by default: a broker has no `FaultInjector` (`Broker.fault_injector` is
None) unless a test harness passes one to the Broker in-process, a `kafkapy.test.fault.*` config
asks for one, or `kafkapy.test.fault.control.socket` names a Unix socket through which another process installs rules (`kafkapy.server.fault_control`; a Unix socket
is local by construction and is created mode 0600).

Rules: `fail(api_key, error_code, count=N)` answers the next N requests of that key with the
error (through the handler's own error answer, so Produce gets it per partition; an API whose
answer has no place for an error code closes the connection, as for a handler crash),
`drop(api_key, count=N)` closes the connection instead of answering (responses queued before it
still go out), `delay(api_key, delay_ms, count=N)` holds the request that long and then serves
it. `count=None` applies until `clear()`. Rules of one key are used in the order they were
added; a `client_id` limits a rule to one client's requests. `drop_after_produce_append(n)`
closes the connection instead of answering the Produce request that made the n-th successful
partition append from then on - data appended but never acknowledged, which the idempotence and
transaction tests need (also set by `kafkapy.test.fault.drop.after.produce.append=N`). Every request is recorded
(`requests()`, bounded), with the fault it got, so a test can also just observe what a client
sent.

Threads: a test thread installs rules while the broker's trio thread consults them, so every
method takes a lock (held for a few list operations, never across I/O).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "FaultAction",
    "FaultInjector",
    "FaultRule",
    "InjectedFailure",
    "ObservedRequest",
]

log = logging.getLogger(__name__)

FaultKind = Literal["fail", "drop", "delay"]
MAX_OBSERVED = 10_000
CONTROL_LINE_BYTES = 64 * 1024


class InjectedFailure(Exception):
    """Raised in the request path to answer with `error_code` instead of running the handler."""

    def __init__(self, error_code: int) -> None:
        super().__init__(f"injected error {error_code}")
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class FaultAction:
    """What one request gets: an error code, a dropped connection, or a delay then service."""

    kind: FaultKind
    error_code: int = 0
    delay_ms: int = 0


@dataclass(slots=True)
class FaultRule:
    api_key: int
    action: FaultAction
    remaining: int | None  # None: until clear()
    client_id: str | None = None

    def matches(self, api_key: int, client_id: str | None) -> bool:
        return self.api_key == api_key and (self.client_id is None or self.client_id == client_id)


@dataclass(frozen=True, slots=True)
class ObservedRequest:
    """One request as it arrived (after decoding, before its handler ran)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str
    peer: str
    at: float  # time.time()
    fault: FaultKind | None


class FaultInjector:
    """Rules consulted by the connection for every request (see the module doc)."""

    def __init__(self, max_observed: int = MAX_OBSERVED) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._observed: deque[ObservedRequest] = deque(maxlen=max_observed)
        self._appends_until_drop = 0  # 0: no drop_after_produce_append pending

    # -- installing rules ---------------------------------------------------------------------
    def fail(
        self, api_key: int, error_code: int, *, count: int | None = 1, client_id: str | None = None
    ) -> None:
        """Answer the next `count` requests of `api_key` with `error_code`."""
        ErrorCode(error_code)  # ValueError for a code Kafka does not define
        self._add(api_key, FaultAction("fail", error_code=int(error_code)), count, client_id)

    def drop(self, api_key: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        """Close the connection instead of answering the next `count` requests of `api_key`."""
        self._add(api_key, FaultAction("drop"), count, client_id)

    def delay(
        self, api_key: int, delay_ms: int, *, count: int | None = 1, client_id: str | None = None
    ) -> None:
        """Hold the next `count` requests of `api_key` for `delay_ms`, then serve them."""
        if delay_ms < 0:
            raise ValueError("delay_ms must be >= 0")
        self._add(api_key, FaultAction("delay", delay_ms=int(delay_ms)), count, client_id)

    def drop_after_produce_append(self, nth: int) -> None:
        """Close the connection instead of answering the Produce request whose partition append
        is the `nth` successful one from now on (counting from 1; once)."""
        if nth < 1:
            raise ValueError("nth must be >= 1")
        with self._lock:
            self._appends_until_drop = int(nth)

    def _add(self, api_key: int, action: FaultAction, count: int | None, client_id: str | None) -> None:
        if count is not None and count < 1:
            raise ValueError("count must be >= 1 (or None: until clear())")
        with self._lock:
            self._rules.append(FaultRule(int(api_key), action, count, client_id))

    def clear(self) -> None:
        """Remove every rule and forget the observed requests."""
        with self._lock:
            self._rules.clear()
            self._observed.clear()
            self._appends_until_drop = 0

    # -- reading back -------------------------------------------------------------------------
    def rules(self) -> list[FaultRule]:
        """The rules still in force (copies)."""
        with self._lock:
            return [FaultRule(r.api_key, r.action, r.remaining, r.client_id) for r in self._rules]

    def requests(self, api_key: int | None = None) -> list[ObservedRequest]:
        """Observed requests, oldest first (all keys, or only `api_key`)."""
        with self._lock:
            return [r for r in self._observed if api_key is None or r.api_key == api_key]

    # -- the broker's side --------------------------------------------------------------------
    def on_request(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        client_id: str | None,
        listener: str,
        peer: str,
    ) -> FaultAction | None:
        """Record one request and take the first matching rule's action (using one of its count)."""
        with self._lock:
            action: FaultAction | None = None
            for i, rule in enumerate(self._rules):
                if rule.matches(api_key, client_id):
                    action = rule.action
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining == 0:
                            del self._rules[i]
                    break
            self._observed.append(
                ObservedRequest(
                    api_key, api_version, correlation_id, client_id, listener, peer, time.time(),
                    None if action is None else action.kind,
                )
            )
            return action

    def on_produce_append(self) -> bool:
        """The produce handler made one successful partition append; True: this is the one
        `drop_after_produce_append` counts to (close the connection instead of answering)."""
        with self._lock:
            if self._appends_until_drop <= 0:
                return False
            self._appends_until_drop -= 1
            return self._appends_until_drop == 0

    # -- the control channel's commands ---------------------------------------------------------
    def command(self, message: dict[str, Any]) -> Any:
        """Run one control-channel command (`{"op": ..., ...}`); ValueError/KeyError/TypeError
        on a malformed one."""
        op = message.get("op")
        count = message.get("count", 1)
        client_id = message.get("client_id")
        if op == "fail":
            self.fail(message["api_key"], message["error_code"], count=count, client_id=client_id)
        elif op == "drop":
            self.drop(message["api_key"], count=count, client_id=client_id)
        elif op == "delay":
            self.delay(message["api_key"], message["delay_ms"], count=count, client_id=client_id)
        elif op == "drop_after_produce_append":
            self.drop_after_produce_append(message["nth"])
        elif op == "clear":
            self.clear()
        elif op == "requests":
            return [asdict(r) for r in self.requests(message.get("api_key"))]
        elif op == "rules":
            return [asdict(r) for r in self.rules()]
        else:
            raise ValueError(f"unknown op {op!r}")
        return None
