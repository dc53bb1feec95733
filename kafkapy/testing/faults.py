"""FaultClient: the `FaultInjector` of a broker in another process, over its control socket.

Why a client with the injector's own method names: a test written against an in-process
broker's `FaultInjector` runs unchanged against a subprocess broker or a cluster node (the
pytest fixtures hand out either). The wire format is the one `kafkapy.broker.faults` serves:
one JSON object per line each way, a fresh connection per command (commands are rare, and a
broker restart then needs no reconnect logic).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from kafkapy.broker.faults import FaultAction, FaultInjector, FaultRule, ObservedRequest

__all__ = ["FaultClient", "FaultControl", "FaultControlError"]

TIMEOUT_S = 10.0


class FaultControlError(RuntimeError):
    """The broker refused a command (the message is its reason) or its socket is unreachable."""


class FaultClient:
    """Same methods as `FaultInjector`, run in the broker process behind `path`."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def fail(self, api_key: int, error_code: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="fail", api_key=int(api_key), error_code=int(error_code), count=count, client_id=client_id)

    def drop(self, api_key: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="drop", api_key=int(api_key), count=count, client_id=client_id)

    def delay(self, api_key: int, delay_ms: int, *, count: int | None = 1, client_id: str | None = None) -> None:
        self._call(op="delay", api_key=int(api_key), delay_ms=int(delay_ms), count=count, client_id=client_id)

    def clear(self) -> None:
        self._call(op="clear")

    def rules(self) -> list[FaultRule]:
        return [
            FaultRule(r["api_key"], FaultAction(**r["action"]), r["remaining"], r["client_id"])
            for r in self._call(op="rules")
        ]

    def requests(self, api_key: int | None = None) -> list[ObservedRequest]:
        found = self._call(op="requests", api_key=None if api_key is None else int(api_key))
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


#: what the fixtures hand out: the injector itself (in-process broker) or a client of one
FaultControl = FaultInjector | FaultClient
