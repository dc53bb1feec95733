"""File regions reach the peer byte-exact, through sendfile on sockets and pread elsewhere."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.raw_response import FileRegion, Segment
from kafkapy.server.zerocopy import send_segments

DATA = os.urandom(300_000)


@pytest.fixture(scope="module")
def fd() -> Iterator[int]:
    with tempfile.TemporaryFile() as f:
        f.write(DATA)
        f.flush()
        yield os.dup(f.fileno())


async def _through_socket(segments: list[Segment], zero_copy: bool) -> bytes:
    a, b = trio.socket.socketpair()
    left, right = trio.SocketStream(a), trio.SocketStream(b)
    received = bytearray()

    async def reader() -> None:
        while True:
            chunk = await right.receive_some(1 << 16)
            if not chunk:
                return
            received.extend(chunk)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await send_segments(left, segments, zero_copy=zero_copy)
            await left.aclose()
    return bytes(received)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 250_000), st.integers(0, 50_000)) | st.binary(max_size=100), max_size=5),
       st.booleans())
async def test_segments_arrive_in_order_and_exact(fd: int, parts: list[object], zero_copy: bool) -> None:
    segments: list[Segment] = []
    expected = b""
    for p in parts:
        if isinstance(p, tuple):
            pos, length = p
            segments.append(FileRegion(fd, pos, length))
            expected += DATA[pos : pos + length]
        elif isinstance(p, bytes):
            segments.append(p)
            expected += p
    assert await _through_socket(segments, zero_copy) == expected


async def test_region_past_end_of_file_fails_instead_of_sending_short(fd: int) -> None:
    a, b = trio.socket.socketpair()
    with trio.fail_after(10), pytest.raises(OSError, match="file region"):
        await send_segments(trio.SocketStream(a), [FileRegion(fd, len(DATA) - 10, 20_000)], zero_copy=True)
    a.close()
    b.close()


@settings(max_examples=10, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=2500))
async def test_many_small_segments_arrive_in_order_past_a_full_send_buffer(parts: list[bytes]) -> None:
    """More buffers than one writev takes, and more bytes than the socket buffer holds: the
    partial writes resume exactly where the kernel stopped."""
    parts = [*parts, os.urandom(1 << 20)]
    assert await _through_socket(list(parts), True) == b"".join(parts)
