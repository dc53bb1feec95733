"""Sans-IO frame reader: arbitrary chunks of bytes in, complete size-prefixed frames out.

Why the size check comes first: a 4-byte prefix is all a peer needs to make us reserve memory,
so an oversized or negative length is rejected the moment the prefix is complete, before a
single body byte is buffered.
"""

from __future__ import annotations

from kafkapy.protocol.errors import ProtocolError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder"]

#: Kafka's `socket.request.max.bytes` default (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


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
                    raise ProtocolError(
                        f"frame size {size} outside 0..{self.max_frame_bytes}"
                    )
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
