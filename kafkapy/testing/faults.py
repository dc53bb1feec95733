"""FaultClient: the `FaultInjector` of a broker in another process, over its control socket.

Why a client with the injector's own method names: a test written against an in-process
broker's `FaultInjector` runs unchanged against a subprocess broker or a cluster node (the
pytest fixtures hand out either). The wire format is the one `kafkapy.broker.faults` serves:
one JSON object per line each way, a fresh connection per command (commands are rare, and a
broker restart then needs no reconnect logic).

APIs and error codes may be named as Kafka names them (`fail("Produce", "NOT_LEADER_OR_FOLLOWER")`,
any case, with or without underscores) as well as given as numbers or `ApiKey` / `ErrorCode`
members: a test reads like the protocol guide it was written from. `NamedFaults` gives an
in-process `FaultInjector` the same spelling, so the fixtures hand out one interface.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from kafkapy.broker.faults import FaultAction, FaultInjector, FaultRule, ObservedRequest
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "ApiRef",
    "ErrorRef",
    "FaultClient",
    "FaultControl",
    "FaultControlError",
    "NamedFaults",
    "api_key_of",
    "error_code_of",
]

TIMEOUT_S = 10.0

#: an API as a test names it: 0, ApiKey.PRODUCE, "Produce", "produce", "PRODUCE", "OffsetCommit"
ApiRef = int | str
#: an error code as a test names it: 6, ErrorCode.NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER"
ErrorRef = int | str


def _folded(name: str) -> str:
    return "".join(c for c in name if c.isalnum()).lower()


_API_BY_NAME = {_folded(k.name): k for k in ApiKey}
_ERROR_BY_NAME = {_folded(e.name): e for e in ErrorCode}


def api_key_of(api: ApiRef) -> int:
    """The API key of `api`: a number, or Kafka's API name in any case ("Produce", "OFFSET_COMMIT").
    ValueError names the closest spellings for an unknown name."""
    if isinstance(api, str):
        found = _API_BY_NAME.get(_folded(api))
        if found is None:
            raise ValueError(f"unknown Kafka API {api!r} (e.g. Produce, Fetch, Metadata, OffsetCommit)")
        return int(found)
    return int(api)


def error_code_of(error: ErrorRef) -> int:
    """The error code of `error`: a number or Kafka's error name ("NOT_LEADER_OR_FOLLOWER")."""
    if isinstance(error, str):
        found = _ERROR_BY_NAME.get(_folded(error))
        if found is None:
            raise ValueError(f"unknown Kafka error {error!r} (e.g. NOT_LEADER_OR_FOLLOWER)")
        return int(found)
    return int(error)


class FaultControlError(RuntimeError):
    """The broker refused a command (the message is its reason) or its socket is unreachable."""


class FaultClient:
    """Same methods as `FaultInjector`, run in the broker process behind `path`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def fail(self, api_key: ApiRef, error_code: ErrorRef, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="fail", api_key=api_key_of(api_key), error_code=error_code_of(error_code), count=count, client_id=client_id)

    def drop(self, api_key: ApiRef, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="drop", api_key=api_key_of(api_key), count=count, client_id=client_id)

    def delay(self, api_key: ApiRef, delay_ms: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="delay", api_key=api_key_of(api_key), delay_ms=int(delay_ms), count=count, client_id=client_id)

    def clear(self) -> None:
        self._call(op="clear")

    def rules(self) -> list[FaultRule]:
        return [
            FaultRule(r["api_key"], FaultAction(**r["action"]), r["remaining"], r["client_id"])
            for r in self._call(op="rules")
        ]

    def requests(self, api_key: ApiRef | None = None) -> list[ObservedRequest]:
        found = self._call(op="requests", api_key=None if api_key is None else api_key_of(api_key))
        return [ObservedRequest(**r) for r in found]

    def _call(self, **message: Any) -> Any:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(TIMEOUT_S)
                sock.connect(str(self.path))
                sock.sendall(json.dumps(message).encode() + b"\n")
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        raise FaultControlError(f"{self.path}: closed before answering")
                    data += chunk
        except OSError as e:
            raise FaultControlError(f"fault control socket {self.path}: {e}") from e
        reply = json.loads(data)
        if not reply.get("ok"):
            raise FaultControlError(reply.get("error", "refused"))
        return reply.get("result")


class NamedFaults:
    """An in-process `FaultInjector` that takes API and error names as `FaultClient` does; every
    other attribute (`drop_after_produce_append`, ...) is the injector's own."""

    def __init__(self, injector: FaultInjector) -> None:
        self.injector = injector

    def fail(self, api_key: ApiRef, error_code: ErrorRef, *, count: int | None = 1, client_id: str | None = None) -> None:
        self.injector.fail(api_key_of(api_key), error_code_of(error_code), count=count, client_id=client_id)

    def drop(self, api_key: ApiRef, *, count: int | None = 1, client_id: str | None = None) -> None:
        self.injector.drop(api_key_of(api_key), count=count, client_id=client_id)

    def delay(self, api_key: ApiRef, delay_ms: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        self.injector.delay(api_key_of(api_key), delay_ms, count=count, client_id=client_id)

    def requests(self, api_key: ApiRef | None = None) -> list[ObservedRequest]:
        return self.injector.requests(None if api_key is None else api_key_of(api_key))

    def rules(self) -> list[FaultRule]:
        return self.injector.rules()

    def clear(self) -> None:
        self.injector.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.injector, name)


#: what the fixtures hand out: a named in-process injector or a client of one in another process
FaultControl = NamedFaults | FaultClient
