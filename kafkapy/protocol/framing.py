"""Sans-IO frame reader: arbitrary chunks of bytes in, complete size-prefixed frames out.

Why the size check comes first: a 4-byte prefix is all a peer needs to make us reserve memory,
so an oversized or negative length is rejected the moment the prefix is complete, before a
single body byte is buffered.
"""

from __future__ import annotations

from kafkapy.protocol.errors import ProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameDecoder",
    "FrameSizeError",
    "foreign_protocol",
]

#: Kafka's `socket.request.max.bytes` default (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC")


def foreign_protocol(prefix: bytes) -> str | None:
    """What a non-Kafka client's first 4 bytes (read as a size prefix) say it speaks, if known:
    "HTTP" (a request line), "HTTP/2" (the connection preface), "TLS" (a handshake record: a
    TLS client on a plaintext listener)."""
    if prefix[:4] == b"PRI ":
        return "HTTP/2"
    if prefix[:4] in _HTTP_METHODS:
        return "HTTP"
    if len(prefix) >= 3 and prefix[0] == 0x16 and prefix[1] == 0x03 and prefix[2] <= 0x04:
        return "TLS"
    return None


class FrameSizeError(ProtocolError):
    """A size prefix outside 0..max; `foreign`: the protocol its bytes look like, if any."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        self.size = size
        self.foreign = foreign_protocol(size.to_bytes(4, "big", signed=True))
        reason = f"frame size {size} outside 0..{max_frame_bytes}"
        if self.foreign == "TLS":
            reason += " - the bytes are a TLS handshake: a TLS client on a plaintext listener?"
        elif self.foreign is not None:
            reason += f" - the bytes are an {self.foreign} request: not a Kafka client (this is a Kafka listener)"
        super().__init__(reason)


class FrameDecoder:
    """Splits a byte stream into frames (the 4-byte big-endian size prefix stripped)."""

    __slots__ = ("_buf", "_need", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._need = -1  # body size of the frame in progress, -1 while reading the prefix

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (0 at a frame boundary)."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add bytes; return every frame they complete, in order."""
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        while True:
            if self._need < 0:
                if len(buf) - pos < 4:
                    break
                size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
                if size < 0 or size > self.max_frame_bytes:
                    self._buf = bytearray()
                    raise FrameSizeError(size, self.max_frame_bytes)
                pos += 4
                self._need = size
            if len(buf) - pos < self._need:
                break
            with memoryview(buf) as view:  # one copy, straight into the frame's bytes
                frames.append(bytes(view[pos : pos + self._need]))
            pos += self._need
            self._need = -1
        if pos:
            del buf[:pos]
        return frames
