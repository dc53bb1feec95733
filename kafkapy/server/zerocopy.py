"""Responses made of pre-encoded bytes and file regions, written with `os.sendfile`.

Why: a Fetch response is mostly record batches that already sit in segment files in wire format.
Sending them with `sendfile(2)` moves them from the page cache to the socket without copying them
through Python. The response header and per-partition framing are small `bytes` segments.

`RawResponse.segments` is the response *after* the 4-byte size prefix and the response header;
the connection adds both. Resource handling: the fds of the file regions in a RawResponse belong
to the response (the fetch handler `dup`s them, so a segment deleted or closed meanwhile stays
readable); the connection closes them once the response was sent or dropped. When the stream is not a plain socket (tests' memory streams, later TLS)
or sendfile fails before sending anything, the file regions are read with `os.pread` instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
from dataclasses import dataclass, field

import trio

__all__ = ["FileRegion", "RawResponse", "close_fds", "send_segments"]


@dataclass(frozen=True, slots=True)
class FileRegion:
    fd: int
    position: int
    length: int


Segment = bytes | bytearray | memoryview | FileRegion


@dataclass(slots=True)
class RawResponse:
    """A response body built by hand (see module doc); `flexible` selects response header v1."""

    segments: list[Segment] = field(default_factory=list)
    flexible: bool = False
    #: error code -> how often the response carries it (for the per-API error metrics)
    error_counts: dict[int, int] | None = None

    def fds(self) -> list[int]:
        return [s.fd for s in self.segments if isinstance(s, FileRegion)]

    @property
    def size(self) -> int:
        return sum(s.length if isinstance(s, FileRegion) else len(s) for s in self.segments)


class ShortFileError(OSError):
    """A file region ended early (the segment was truncated or deleted under us)."""


def close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def read_region(region: FileRegion) -> bytes:
    data = os.pread(region.fd, region.length, region.position)
    if len(data) != region.length:
        raise ShortFileError(errno.EIO, f"file region short by {region.length - len(data)} bytes")
    return data


async def _sendfile(sock: trio.socket.SocketType, region: FileRegion) -> None:
    offset, remaining = region.position, region.length
    fd = sock.fileno()
    while remaining > 0:
        try:
            sent = os.sendfile(fd, region.fd, offset, remaining)
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        if sent == 0:
            raise ShortFileError(errno.EIO, "file region ended before its length")
        offset += sent
        remaining -= sent
    await trio.lowlevel.checkpoint()


async def send_segments(stream: trio.abc.SendStream, segments: list[Segment], *, zero_copy: bool) -> None:
    """Write `segments` in order; coalesce small bytes, sendfile file regions on plain sockets."""
    sock = stream.socket if zero_copy and isinstance(stream, trio.SocketStream) else None
    pending: list[bytes | bytearray | memoryview] = []
    for seg in segments:
        if isinstance(seg, FileRegion):
            if sock is None or seg.length < 4096:
                pending.append(read_region(seg))
                continue
            if pending:
                await stream.send_all(b"".join(pending))
                pending = []
            await _sendfile(sock, seg)
        else:
            pending.append(seg)
    if pending:
        await stream.send_all(b"".join(pending))
