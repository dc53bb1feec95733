"""The test fault injector's control socket: JSON-lines commands on a Unix socket, answered by
the broker's `FaultInjector` (kafkapy.broker.faults, which holds the rules and the wire format's
commands); tests and `kafkapy.testing.faults` are the clients.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.faults import CONTROL_LINE_BYTES, FaultInjector

__all__ = ["serve_fault_control"]

log = logging.getLogger(__name__)


def _answer(injector: FaultInjector, line: bytes) -> bytes:
    try:
        message = json.loads(line)
        if not isinstance(message, dict):
            raise TypeError("a command is a JSON object")
        reply: dict[str, Any] = {"ok": True, "result": injector.command(message)}
    except (ValueError, KeyError, TypeError) as e:
        reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return json.dumps(reply).encode() + b"\n"


async def _serve_control_connection(injector: FaultInjector, stream: trio.SocketStream) -> None:
    buffer = bytearray()
    async with stream:
        try:
            while True:
                data = await stream.receive_some(CONTROL_LINE_BYTES)
                if not data:
                    return
                buffer += data
                if len(buffer) > CONTROL_LINE_BYTES and b"\n" not in buffer:
                    log.warning("fault control: command longer than %d bytes, closing", CONTROL_LINE_BYTES)
                    return
                while b"\n" in buffer:
                    line, _, rest = bytes(buffer).partition(b"\n")
                    buffer = bytearray(rest)
                    await stream.send_all(_answer(injector, line))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            log.debug("fault control connection closed: %r", e)


async def serve_fault_control(
    injector: FaultInjector,
    path: Path,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve JSON-lines commands for `injector` on a Unix socket at `path` (mode 0600) until
    cancelled; the socket file is removed on exit. One reply line per command line:
    `{"ok": true, "result": ...}` or `{"ok": false, "error": "..."}`."""
    _remove_socket_file(path)
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        old_umask = os.umask(0o177)
        try:
            await sock.bind(str(path))
        finally:
            os.umask(old_umask)
        sock.listen(8)
        listener = trio.SocketListener(sock)
    except BaseException:
        sock.close()
        raise
    try:
        async with listener, trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(_serve_control_connection, injector, stream)
    finally:
        _remove_socket_file(path)


def _remove_socket_file(path: Path) -> None:
    """A stale socket from a crashed broker, or ours at exit (a local file: no need for a thread)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
