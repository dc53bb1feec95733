"""Test helpers: an in-process broker on 127.0.0.1:0 and a minimal client speaking our codec.

Why our own codec and real sockets: the server tests check wire behaviour (ordering, framing,
error codes) end to end without any mocked broker; real-client tests live in compat_tests/.
"""

from __future__ import annotations

import struct
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from kafkapy.protocol import RequestHeader, decode_response, encode_request
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig

IO_TIMEOUT_S = 10


@asynccontextmanager
async def running_broker(data_dir: Path | None, **overrides: str) -> AsyncIterator[tuple[Broker, Server, int]]:
    """Start a broker + server in a nursery; yields (broker, server, port); stops it cleanly."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.retention.check.interval.ms": "600000",
        # one partition: creating and closing 50 of them costs seconds on a slow shared disk
        "offsets.topic.num.partitions": "1",
    }
    if data_dir is not None:
        settings["log.dirs"] = str(data_dir)
    settings.update(overrides)
    broker = Broker(BrokerConfig(settings), memory=data_dir is None)
    server = Server(broker)
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        try:
            yield broker, server, bound[0].port
        finally:
            server.request_shutdown()
            with trio.fail_after(IO_TIMEOUT_S):
                await server.stopped.wait()


class Client:
    """Pipelining-capable raw client: `send` many, `receive` in order."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buf = bytearray()
        self._corr = 0
        self.pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    @classmethod
    async def connect(cls, port: int) -> Client:
        with trio.fail_after(IO_TIMEOUT_S):
            return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def send(self, api_key: int, version: int, msg: Any, *, client_id: str = "test") -> int:
        self._corr += 1
        frame = encode_request(RequestHeader(api_key, version, self._corr, client_id), msg)
        await self.send_raw(struct.pack(">i", len(frame)) + frame)
        self.pending.append((self._corr, api_key, version))
        return self._corr

    async def send_raw(self, data: bytes) -> None:
        with trio.fail_after(IO_TIMEOUT_S):
            await self.stream.send_all(data)

    async def read_frame(self, wait_s: float = IO_TIMEOUT_S) -> bytes | None:
        """The next response frame, or None when the server closed the connection."""
        with trio.fail_after(wait_s):
            while True:
                if len(self._buf) >= 4:
                    (size,) = struct.unpack_from(">i", self._buf)
                    if len(self._buf) >= 4 + size:
                        frame = bytes(self._buf[4 : 4 + size])
                        del self._buf[: 4 + size]
                        return frame
                data = await self.stream.receive_some(1 << 20)
                if not data:
                    return None
                self._buf += data

    async def receive(self, wait_s: float = IO_TIMEOUT_S) -> tuple[int, Any]:
        corr, api_key, version = self.pending.pop(0)
        frame = await self.read_frame(wait_s)
        assert frame is not None, "server closed the connection"
        got_corr, msg = decode_response(api_key, version, frame)
        assert got_corr == corr, f"response {got_corr} out of order, expected {corr}"
        return corr, msg

    async def request(self, api_key: int, version: int, msg: Any) -> Any:
        await self.send(api_key, version, msg)
        return (await self.receive())[1]


def batch(*values: bytes, key: bytes | None = None, timestamp: int | None = None) -> bytes:
    ts = timestamp if timestamp is not None else int(time.time() * 1000)
    records = [Record(i, 0, key, v, []) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=ts)
