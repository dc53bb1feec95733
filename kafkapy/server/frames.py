"""A client connection's frames on the wire: reading size-prefixed request frames from a
stream, and writing size-prefixed responses.

Why a module of its own: the connection (`connection.py`) and the authentication phase before it
(`authenticator.py`) read the same frames from the same source - a SASL client may
pipeline requests right behind its last SASL message, and those frames are handed on as they
are - so both use the one reader here, and neither imports the other's module for it.

Receive path on plain sockets (`SocketFrames`): memory follows what the peer has sent. An idle
connection holds no buffer: every connection reads into one shared scratch buffer and copies each
complete frame out of it (one copy, as `bytes`; a frame of `OWN_BUFFER_BYTES` or more as a
bytearray, so a produce request's `records` are a writable view the log patches offsets into).
A frame split across reads is assembled in a buffer of its own that grows as its bytes arrive
(a small one is copied once more, into `bytes`, when whole) -
a large body is received straight into it, doubling, so a bare size prefix announcing 100 MiB
costs nothing until the bytes come. Other streams (TLS, tests' memory streams) use the sans-IO
`FrameDecoder` (`StreamFrames`), whose buffer also grows with the data. Both refuse a negative or
oversized size prefix before buffering any of the body (`FrameSizeError`), and
`max_frame_bytes` may change between calls (the SASL phase's lower cap).

Request memory (`RequestMemory`, `queued.max.request.bytes`): a frame is admitted before its
body is buffered (on TLS, once whole); at the bound the connection stops reading until answers
free memory, as Kafka mutes channels when its memory pool is exhausted. The connection releases a
request's bytes once its handler has answered.
"""

from __future__ import annotations

import os
import struct
from collections import deque

import trio

from kafkapy.protocol import FrameDecoder, RequestHeader, decode_request_header
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.framing import FrameSizeError

__all__ = [
    "OWN_BUFFER_BYTES",
    "RECEIVE_BYTES",
    "FrameSource",
    "RequestMemory",
    "SocketFrames",
    "StreamFrames",
    "frame_source",
    "request_header_prefix",
    "send_frame",
    "size_prefixed",
]

_SIZE = struct.Struct(">i")
#: one read's worth: the shared scratch buffer's size, and a `StreamFrames` read
RECEIVE_BYTES = 256 * 1024
#: frames at least this big are kept as a bytearray (records patched in place); bodies with at
#: least this much still to come are received straight into the frame's own buffer
OWN_BUFFER_BYTES = 64 * 1024
#: every `SocketFrames` reads into this and takes what it read out before its next await (trio
#: runs one task at a time), so no connection holds a receive buffer of its own
_SCRATCH = memoryview(bytearray(4 + RECEIVE_BYTES))


class RequestMemory:
    """`queued.max.request.bytes`: the bytes of requests read but not yet answered, across all
    connections - Kafka's request memory pool.

    A frame is admitted when its size prefix is read, for its announced size (so an admitted
    frame can always be completed: two half-read frames never wait for each other); at the
    bound, connections stop reading until answers free memory (Kafka's muting). A request larger
    than the bound is admitted when nothing else is queued. `limit <= 0`: no bound (Kafka's -1).
    The cost of counting announced sizes, as Kafka does: a client that announces large frames and
    then sends slowly holds that much of the bound until it sends them or is closed as idle."""

    __slots__ = ("_lot", "limit", "queued")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.queued = 0
        self._lot = trio.lowlevel.ParkingLot()

    def try_reserve(self, size: int) -> bool:
        if self.limit > 0 and self.queued and self.queued + size > self.limit:
            return False
        self.queued += size
        return True

    async def reserve(self, size: int) -> None:
        """Wait until `size` bytes are admitted (cancel-safe: nothing is held if cancelled)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self.try_reserve(size):
            await self._lot.park()

    def force(self, size: int) -> None:
        """Count bytes already read (they are answered and released like any request)."""
        self.queued += size

    def release(self, size: int) -> None:
        self.queued -= size
        if self._lot:
            self._lot.unpark_all()


class SocketFrames:
    """Size-prefixed frames from a socket (see the module doc).

    Same checks as `FrameDecoder`: a negative or oversized length is refused as soon as the
    prefix is read, before any body byte is buffered. A cancelled `receive()` (idle timeout,
    shutdown) loses nothing: a frame in progress is kept and resumed on the next call."""

    __slots__ = (
        "_admitted", "_backlog", "_drained", "_frame", "_got", "_need", "max_frame_bytes", "memory", "sock",
    )

    def __init__(
        self, sock: trio.socket.SocketType, max_frame_bytes: int, memory: RequestMemory | None = None
    ) -> None:
        self.sock = sock
        self.max_frame_bytes = max_frame_bytes
        self.memory = RequestMemory(0) if memory is None else memory
        #: read but not yet taken: a partial size prefix, or what follows a frame waiting for memory
        self._backlog = b""
        self._need = -1  # body size of the frame in progress, -1 while reading a size prefix
        self._admitted = False  # the frame in progress holds its bytes in `memory`
        self._frame = bytearray()  # its body so far; may have room beyond `_got` for the next read
        self._got = 0
        self._drained = False  # the last read left room in its buffer: nothing more was queued

    @property
    def buffered(self) -> int:
        """Bytes held for frames not yet complete (what the peer sent, and room for a read)."""
        return len(self._backlog) + len(self._frame)

    async def receive(self) -> list[bytes | bytearray]:
        """The next complete frames (at least one); [] when the peer closed the connection."""
        frames: list[bytes | bytearray] = []
        while True:
            if self._need >= 0 and not self._admitted:
                if frames:
                    return frames
                await self.memory.reserve(self._need)  # muted until answers free memory
                self._admitted = True
                if self._need == 0:
                    frames.append(self._complete())
            if self._backlog and (self._need >= 0 or len(self._backlog) >= 4):
                backlog, self._backlog = self._backlog, b""
                self._take(memoryview(backlog), frames)
                continue
            if frames:
                return frames
            if self._need - self._got >= OWN_BUFFER_BYTES:
                if not await self._fill(frames):
                    return []
                continue
            n = await self._read(_SCRATCH[4:])
            if n == 0:
                return []
            # no await from here until `_take` has copied out what it keeps
            start = 4 - len(self._backlog)
            _SCRATCH[start:4] = self._backlog
            self._backlog = b""
            self._take(_SCRATCH[start : 4 + n], frames)

    def _take(self, data: memoryview, frames: list[bytes | bytearray]) -> None:
        """Frame `data`; what must wait (a partial prefix, bytes behind a frame not admitted yet)
        is kept in `_backlog`. A frame wholly inside `data` costs one copy, its own."""
        pos, end = 0, len(data)
        while pos < end:
            if self._need < 0:
                if end - pos < 4:
                    break
                size = _SIZE.unpack_from(data, pos)[0]
                if size < 0 or size > self.max_frame_bytes:
                    raise FrameSizeError(size, self.max_frame_bytes)
                pos += 4
                self._need = size
                self._admitted = self.memory.try_reserve(size)
                if self._admitted and end - pos >= size:
                    body = data[pos : pos + size]
                    frames.append(bytearray(body) if size >= OWN_BUFFER_BYTES else bytes(body))
                    pos += size
                    self._need = -1
                    continue
            if not self._admitted:
                break
            take = min(end - pos, self._need - self._got)
            self._frame[self._got : self._got + take] = data[pos : pos + take]
            self._got += take
            pos += take
            if self._got == self._need:
                frames.append(self._complete())
        if pos < end:
            self._backlog = bytes(data[pos:end])

    def _complete(self) -> bytes | bytearray:
        frame = self._frame
        self._frame, self._got, self._need, self._admitted = bytearray(), 0, -1, False
        return frame if len(frame) >= OWN_BUFFER_BYTES else bytes(frame)

    async def _fill(self, frames: list[bytes | bytearray]) -> bool:
        """Receive more of a large body straight into its buffer, which grows with what arrives
        (doubling, so at most twice what the peer sent): never the announced size up front."""
        frame = self._frame
        if len(frame) == self._got:  # no room left: make room only once bytes are waiting
            await trio.lowlevel.wait_readable(self.sock)
            frame += bytes(min(self._need - self._got, max(self._got, OWN_BUFFER_BYTES)))
        with memoryview(frame) as target:
            n = await self._read(target[self._got :])
        if n == 0:
            return False
        self._got += n
        if self._got == self._need:
            frames.append(self._complete())
        return True

    async def _read(self, target: memoryview) -> int:
        """One non-blocking read into `target`, waiting only while nothing is readable. The
        wait (or a checkpoint) comes first: no other task runs between the read and its
        caller's parse. After a read that left room the socket was drained, so the next read
        waits for readiness at once instead of a read that would only fail with EAGAIN."""
        if self._drained:
            await trio.lowlevel.wait_readable(self.sock)
        else:
            await trio.lowlevel.checkpoint()
        while True:
            try:
                n = os.readv(self.sock.fileno(), [target])
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)
                continue
            self._drained = 0 < n < len(target)
            return n

    def use_memory(self, memory: RequestMemory) -> None:
        """Count in `memory` from now on (after authentication); a frame in progress moves."""
        if self._need >= 0 and self._admitted:
            self.memory.release(self._need)
            memory.force(self._need)
        self.memory = memory

    def close(self) -> None:
        """Give back the memory a frame in progress holds (the connection is closing)."""
        if self._need >= 0 and self._admitted:
            self.memory.release(self._need)
        self._frame, self._got, self._need, self._admitted = bytearray(), 0, -1, False


class StreamFrames:
    """Frames from any other stream (TLS, tests' memory streams) through `FrameDecoder`; same
    contract as `SocketFrames.receive` (a cancelled call loses nothing: the decoder keeps it).
    The decoder's buffer grows with what arrives; frames are admitted to `memory` once whole."""

    __slots__ = ("_ready", "decoder", "memory", "stream")

    def __init__(
        self, stream: trio.abc.ReceiveStream, max_frame_bytes: int, memory: RequestMemory | None = None
    ) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(max_frame_bytes)
        self.memory = RequestMemory(0) if memory is None else memory
        self._ready: deque[bytes] = deque()  # whole, not yet admitted

    @property
    def max_frame_bytes(self) -> int:
        return self.decoder.max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self.decoder.max_frame_bytes = value

    async def receive(self) -> list[bytes | bytearray]:
        """The next complete frames (at least one); [] when the peer closed the connection."""
        while not self._ready:
            data = await self.stream.receive_some(RECEIVE_BYTES)
            if not data:
                return []
            self._ready.extend(self.decoder.feed(data))
        frames: list[bytes | bytearray] = []
        while self._ready:
            size = len(self._ready[0])
            if not self.memory.try_reserve(size):
                if frames:
                    break
                await self.memory.reserve(size)
            frames.append(self._ready.popleft())
        return frames

    def use_memory(self, memory: RequestMemory) -> None:
        """Count in `memory` from now on (frames not yet returned are admitted there)."""
        self.memory = memory

    def close(self) -> None:
        """Nothing to give back: frames are admitted only when returned."""


FrameSource = SocketFrames | StreamFrames


def frame_source(
    stream: trio.abc.ReceiveStream, max_frame_bytes: int, memory: RequestMemory | None = None
) -> FrameSource:
    """The reader for `stream`: `SocketFrames` on a plain socket, `FrameDecoder` otherwise;
    `memory`: where its frames are admitted (None: a private, unbounded one)."""
    if isinstance(stream, trio.SocketStream):
        return SocketFrames(stream.socket, max_frame_bytes, memory)
    return StreamFrames(stream, max_frame_bytes, memory)


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
