"""Writing a RawResponse's segments to a stream: file regions with `os.sendfile` on plain sockets.

Sending record batches with `sendfile(2)` moves them from the page cache to the socket without
copying them through Python (the response's shape: `kafkapy.protocol.raw_response`). When the
stream is not a plain socket (tests' memory streams, TLS) or a region is small, the file regions
are read with `os.pread` instead. The connection closes a response's fds (`close_fds`) once it was
sent or dropped.
"""

from __future__ import annotations

import contextlib
import errno
import os

import trio

from kafkapy.protocol.raw_response import SENDFILE_MIN_BYTES, FileRegion, Segment

__all__ = ["SENDFILE_MIN_BYTES", "ShortFileError", "close_fds", "read_region", "send_segments"]



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


#: most buffers one `writev(2)` takes (Linux's IOV_MAX)
_IOV_MAX = 1024


async def _writev(sock: trio.socket.SocketType, buffers: list[bytes | bytearray | memoryview]) -> None:
    """Write `buffers` in order with `writev(2)` on the socket's fd: no join copy, and no trip
    through trio's scheduler unless the socket's send buffer is full (then wait until writable).
    Small answers of several pipelined requests thus leave in one system call."""
    fd = sock.fileno()
    pending = buffers
    while pending:
        try:
            sent = os.writev(fd, pending[:_IOV_MAX])
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)
            continue
        for i, buf in enumerate(pending):
            if sent < len(buf):
                pending = [memoryview(buf)[sent:], *pending[i + 1 :]]
                break
            sent -= len(buf)
        else:
            return


async def send_segments(stream: trio.abc.SendStream, segments: list[Segment], *, zero_copy: bool) -> None:
    """Write `segments` in order; file regions with sendfile on plain sockets (small ones read
    in), the bytes between them with one `writev` - or joined, on other streams."""
    sock = stream.socket if zero_copy and isinstance(stream, trio.SocketStream) else None
    pending: list[bytes | bytearray | memoryview] = []
    for seg in segments:
        if isinstance(seg, FileRegion):
            if sock is None or seg.length < SENDFILE_MIN_BYTES:
                pending.append(read_region(seg))
                continue
            if pending:
                await _writev(sock, pending)
                pending = []
            await _sendfile(sock, seg)
        else:
            pending.append(seg)
    if not pending:
        return
    if sock is not None:
        await _writev(sock, pending)
    else:
        await stream.send_all(b"".join(pending))
