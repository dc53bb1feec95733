"""A client connection's frames on the wire: reading size-prefixed request frames from a
stream, and writing size-prefixed responses.

Why a module of its own: the connection (`connection.py`) and the authentication phase before it
(`security/authenticator.py`) read the same frames from the same source - a SASL client may
pipeline requests right behind its last SASL message, and those frames are handed on as they
are - so both use the one reader here, and neither imports the other's module for it.

Receive path on plain sockets (`SocketFrames`): `recv_into` a preallocated buffer, and a large
frame (a produce request) is received straight into a buffer of its own exact size - one copy
from the kernel instead of three (recv's bytes, the decoder's buffer, the frame). That buffer is
a bytearray, so the request's `records` are a writable view the log patches offsets into without
copying again. Other streams (TLS, tests' memory streams) use the sans-IO `FrameDecoder`
(`StreamFrames`). Both refuse a negative or oversized size prefix before buffering any of the
body (`FrameSizeError`), and `max_frame_bytes` may change between calls (the SASL phase's lower
cap).
"""

from __future__ import annotations

import struct

import trio

from kafkapy.protocol import FrameDecoder, RequestHeader, decode_request_header
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.framing import FrameSizeError

__all__ = [
    "OWN_BUFFER_BYTES",
    "RECEIVE_BYTES",
    "FrameSource",
    "SocketFrames",
    "StreamFrames",
    "frame_source",
    "request_header_prefix",
    "send_frame",
    "size_prefixed",
]

_SIZE = struct.Struct(">i")
RECEIVE_BYTES = 256 * 1024
#: frames at least this big get a buffer of their own (received into directly, never copied)
OWN_BUFFER_BYTES = 64 * 1024


class SocketFrames:
    """Size-prefixed frames from a socket, received with `recv_into` (see the module doc).

    Same checks as `FrameDecoder`: a negative or oversized length is refused as soon as the
    prefix is read, before any body byte is buffered. A cancelled `receive()` (idle timeout,
    shutdown) loses nothing: a large frame in progress is kept and resumed on the next call."""

    __slots__ = ("_buf", "_end", "_got", "_pending", "_start", "_view", "max_frame_bytes", "sock")

    def __init__(self, sock: trio.socket.SocketType, max_frame_bytes: int) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray(RECEIVE_BYTES)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._pending: bytearray | None = None  # a large frame being received into its own buffer
        self._got = 0

    async def receive(self) -> list[bytes | bytearray]:
        """The next complete frames (at least one); [] when the peer closed the connection."""
        frames: list[bytes | bytearray] = []
        view = self._view
        while True:
            if self._pending is not None:
                if not await self._fill():
                    return []
                frames.append(self._pending)
                self._pending = None
            while self._end - self._start >= 4:
                start = self._start
                size = _SIZE.unpack_from(self._buf, start)[0]
                if size < 0 or size > self.max_frame_bytes:
                    raise FrameSizeError(size, self.max_frame_bytes)
                have = self._end - start - 4
                if size >= OWN_BUFFER_BYTES and have < size:
                    frame = bytearray(size)
                    frame[:have] = view[start + 4 : self._end]
                    self._start = self._end
                    self._pending, self._got = frame, have
                    break
                if have < size:
                    break
                body = view[start + 4 : start + 4 + size]
                frames.append(bytearray(body) if size >= OWN_BUFFER_BYTES else bytes(body))
                self._start = start + 4 + size
            if self._start == self._end:
                self._start = self._end = 0
            if self._pending is not None:
                continue
            if frames:
                return frames
            if self._start and self._end == len(self._buf):  # partial frame at the very end
                rest = self._end - self._start
                view[:rest] = view[self._start : self._end]
                self._start, self._end = 0, rest
            n = await self.sock.recv_into(view[self._end :])
            if n == 0:
                return []
            self._end += n

    async def _fill(self) -> bool:
        """Receive the rest of the pending frame; False when the peer closed first."""
        frame = self._pending
        assert frame is not None
        with memoryview(frame) as target:
            while self._got < len(frame):
                n = await self.sock.recv_into(target[self._got :])
                if n == 0:
                    return False
                self._got += n
        return True


class StreamFrames:
    """Frames from any other stream (TLS, tests' memory streams) through `FrameDecoder`; same
    contract as `SocketFrames.receive` (a cancelled call loses nothing: the decoder keeps it)."""

    __slots__ = ("decoder", "stream")

    def __init__(self, stream: trio.abc.ReceiveStream, max_frame_bytes: int) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(max_frame_bytes)

    @property
    def max_frame_bytes(self) -> int:
        return self.decoder.max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self.decoder.max_frame_bytes = value

    async def receive(self) -> list[bytes | bytearray]:
        """The next complete frames (at least one); [] when the peer closed the connection."""
        while True:
            data = await self.stream.receive_some(RECEIVE_BYTES)
            if not data:
                return []
            frames: list[bytes | bytearray] = [*self.decoder.feed(data)]
            if frames:
                return frames


FrameSource = SocketFrames | StreamFrames


def frame_source(stream: trio.abc.ReceiveStream, max_frame_bytes: int) -> FrameSource:
    """The reader for `stream`: `recv_into` on a plain socket, `FrameDecoder` otherwise."""
    if isinstance(stream, trio.SocketStream):
        return SocketFrames(stream.socket, max_frame_bytes)
    return StreamFrames(stream, max_frame_bytes)


def size_prefixed(body: bytes) -> bytes:
    """`body` as one frame: its 4-byte big-endian size, then the body."""
    return _SIZE.pack(len(body)) + body


async def send_frame(stream: trio.abc.SendStream, body: bytes) -> None:
    await stream.send_all(_SIZE.pack(len(body)) + body)


def request_header_prefix(frame: bytes | bytearray) -> RequestHeader | None:
    """The request header, or at least its fixed part (key, version, correlation id).

    Why the fallback: a client newer than us may send ApiVersions vN with a header layout we
    cannot know (flexible or not); the fixed 8 bytes are enough to answer it.
    """
    try:
        return decode_request_header(frame)
    except ProtocolError:
        if len(frame) < 8:
            return None
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
        return RequestHeader(api_key, api_version, correlation_id, None)
