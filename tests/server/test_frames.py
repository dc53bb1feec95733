"""The socket receive path frames exactly like `FrameDecoder`, whatever the chunking, refuses
bad sizes before buffering a body, holds memory only for bytes the peer has sent, and admits
frames to the request memory (`queued.max.request.bytes`)."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import FrameDecoder, decode_request
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.server.frames import (
    OWN_BUFFER_BYTES,
    RECEIVE_BYTES,
    RequestMemory,
    SocketFrames,
    StreamFrames,
    request_header_prefix,
    size_prefixed,
)

from .helpers import batch

# At most this many sends per stream: a 1 MiB stream in 1-byte pieces is a million sends (over
# 20 s under load, and hypothesis then spends minutes shrinking it). Small streams still go
# byte by byte; large ones are split at least every len/MAX_PIECES bytes.
MAX_PIECES = 4096

SIZES = st.sampled_from([0, 1, 7, 4096, OWN_BUFFER_BYTES - 1, OWN_BUFFER_BYTES, RECEIVE_BYTES - 3, RECEIVE_BYTES + 5])


def _stream(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


async def _receive_all(
    data: bytes, chunks: list[int], max_frame: int = 10 * 2**20, memory: RequestMemory | None = None
) -> list[bytes]:
    """Send `data` in pieces of the given sizes over a socketpair; collect frames until EOF
    (each frame's request memory released once received, as if answered)."""
    a, b = trio.socket.socketpair()
    frames: list[bytes] = []
    with a, b:
        reader = SocketFrames(b, max_frame, memory)

        min_piece = -(-len(data) // MAX_PIECES)

        async def send() -> None:
            pos, i = 0, 0
            while pos < len(data):
                n = max(chunks[i % len(chunks)], min_piece)
                i += 1
                chunk = data[pos : pos + n]
                sent = 0
                while sent < len(chunk):
                    sent += await a.send(chunk[sent:])
                pos += n
                await trio.lowlevel.checkpoint()
            a.shutdown(trio.socket.SHUT_WR)

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                for _ in range(1000):
                    got = await reader.receive()
                    if not got:
                        break
                    frames.extend(bytes(f) for f in got)
                    for f in got:
                        reader.memory.release(len(f))
    return frames


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(SIZES, min_size=1, max_size=4),
    chunks=st.lists(st.integers(1, 300_000), min_size=1, max_size=4),
    seed=st.integers(0, 255),
)
@example(sizes=[7, 0, 1, 4096], chunks=[1], seed=3)  # every byte its own send
@example(sizes=[RECEIVE_BYTES + 5] * 4, chunks=[1], seed=1)  # the largest stream, most pieces
async def test_frames_match_frame_decoder_for_any_chunking(sizes: list[int], chunks: list[int], seed: int) -> None:
    bodies = [bytes([(seed + i) % 256]) * n for i, n in enumerate(sizes)]
    data = _stream(bodies)
    assert await _receive_all(data, chunks) == FrameDecoder(10 * 2**20).feed(data) == bodies


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(SIZES, min_size=1, max_size=4),
    chunks=st.lists(st.integers(1, 300_000), min_size=1, max_size=4),
    limit=st.sampled_from([1, 4096, OWN_BUFFER_BYTES, 10 * 2**20]),
)
async def test_a_bounded_request_memory_delivers_the_same_frames_and_ends_empty(
    sizes: list[int], chunks: list[int], limit: int
) -> None:
    bodies = [bytes([i % 256]) * n for i, n in enumerate(sizes)]
    memory = RequestMemory(limit)
    assert await _receive_all(_stream(bodies), chunks, memory=memory) == bodies
    assert memory.queued == 0


async def test_oversized_and_negative_sizes_are_refused_before_the_body() -> None:
    for prefix in (struct.pack(">i", 2000), struct.pack(">i", -1)):
        a, b = trio.socket.socketpair()
        with a, b, trio.fail_after(10):
            await a.send(prefix + b"x" * 10)
            with pytest.raises(ProtocolError):
                await SocketFrames(b, 1000).receive()


async def test_large_produce_frame_gives_writable_records() -> None:
    """What the in-place append relies on: a large request's records are a writable view."""
    from kafkapy.protocol import ApiKey, RequestHeader, encode_request

    records = batch(*[b"v" * 1024] * 100)
    req = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    body = encode_request(RequestHeader(ApiKey.PRODUCE, 7, 1, "c"), req)
    assert len(body) >= OWN_BUFFER_BYTES
    a, b = trio.socket.socketpair()
    with a, b, trio.fail_after(10):
        await a.send(struct.pack(">i", len(body)) + body[:1000])
        reader = SocketFrames(b, 10 * 2**20)
        async with trio.open_nursery() as nursery:

            async def rest() -> None:
                view = memoryview(body)[1000:]
                while view:
                    view = view[await a.send(view) :]

            nursery.start_soon(rest)
            (frame,) = await reader.receive()
    assert isinstance(frame, bytearray)
    _header, decoded = decode_request(frame)
    assert isinstance(decoded, ProduceRequest)
    got = decoded.topic_data[0].partition_data[0].records
    assert isinstance(got, memoryview)
    assert not got.readonly
    assert bytes(got) == records


def test_request_header_prefix_falls_back_to_the_fixed_fields() -> None:
    """A request whose header we cannot decode (e.g. ApiVersions from a newer client) still
    yields key, version and correlation id for the UNSUPPORTED_VERSION answer; less than those
    8 bytes yields None."""
    full = struct.pack(">hhih", 18, 3, 77, 3) + b"cli" + b"\x00"
    header = request_header_prefix(full)
    assert header is not None
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 77, "cli")
    broken = struct.pack(">hhih", 18, 99, 78, 500)  # client id length runs past the frame
    header = request_header_prefix(broken)
    assert header is not None
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 99, 78, None)
    assert request_header_prefix(b"\x00\x12\x00") is None


def test_size_prefixed_frames_decode_back() -> None:
    decoder = FrameDecoder(1000)
    assert decoder.feed(size_prefixed(b"abc") + size_prefixed(b"")) == [b"abc", b""]


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[await sock.send(view) :]


async def test_a_frame_sent_in_pieces_is_assembled_in_a_buffer_that_grows_with_them() -> None:
    body = bytes(range(256)) * (3 * 2**20 // 256)
    a, b = trio.socket.socketpair()
    with a, b, trio.fail_after(20):
        reader = SocketFrames(b, 10 * 2**20)
        assert reader.buffered == 0  # an idle connection holds no receive buffer
        await a.send(struct.pack(">i", len(body)) + body[:1000])
        sent = 1000
        while sent < len(body):
            with trio.move_on_after(0.05):
                assert await reader.receive() == []  # nothing whole yet: receive() waits
            # what the peer sent, at most doubled, plus one read's room
            assert reader.buffered <= 2 * sent + OWN_BUFFER_BYTES
            piece = body[sent : sent + 100 * 1024]  # less than the socket buffer: never blocks
            await _send_all(a, piece)
            sent += len(piece)
        (frame,) = await reader.receive()
        assert frame == body
        assert reader.buffered == 0


async def test_a_bare_size_prefix_announcing_100_mib_allocates_nothing_large() -> None:
    a, b = trio.socket.socketpair()
    with a, b, trio.fail_after(10):
        reader = SocketFrames(b, 200 * 2**20)
        await a.send(struct.pack(">i", 100 * 2**20) + b"abcd")
        with trio.move_on_after(0.2) as waited:
            await reader.receive()
        assert waited.cancelled_caught
        assert reader.buffered < OWN_BUFFER_BYTES


async def test_at_the_bound_reading_stops_until_memory_is_released() -> None:
    memory = RequestMemory(1000)
    a1, b1 = trio.socket.socketpair()
    a2, b2 = trio.socket.socketpair()
    with a1, b1, a2, b2, trio.fail_after(10):
        first, second = SocketFrames(b1, 10_000, memory), SocketFrames(b2, 10_000, memory)
        await a1.send(struct.pack(">i", 600) + b"a" * 600)
        assert await first.receive() == [b"a" * 600]
        assert memory.queued == 600
        await a2.send(struct.pack(">i", 600) + b"b" * 600 + struct.pack(">i", 3) + b"xyz")
        with trio.move_on_after(0.2) as waited:
            await second.receive()
        assert waited.cancelled_caught  # muted: 600 + 600 is over the bound
        assert memory.queued == 600
        memory.release(600)  # the first request is answered
        assert await second.receive() == [b"b" * 600, b"xyz"]
        assert memory.queued == 603


async def test_a_request_larger_than_the_bound_is_admitted_alone() -> None:
    memory = RequestMemory(1000)
    a, b = trio.socket.socketpair()
    with a, b, trio.fail_after(10):
        reader = SocketFrames(b, 10_000, memory)
        await a.send(struct.pack(">i", 5000) + b"x" * 5000 + struct.pack(">i", 1) + b"y")
        assert await reader.receive() == [b"x" * 5000]  # nothing else queued: admitted
        with trio.move_on_after(0.2) as waited:
            await reader.receive()
        assert waited.cancelled_caught  # the next one waits for it, however small
        memory.release(5000)
        assert await reader.receive() == [b"y"]


async def test_closing_gives_back_the_memory_of_a_frame_in_progress() -> None:
    memory = RequestMemory(1000)
    a, b = trio.socket.socketpair()
    with a, b, trio.fail_after(10):
        reader = SocketFrames(b, 10_000, memory)
        await a.send(struct.pack(">i", 500) + b"x" * 10)
        with trio.move_on_after(0.2):
            await reader.receive()
        assert memory.queued == 500
        reader.close()
        assert memory.queued == 0


async def test_stream_frames_are_admitted_one_at_a_time_at_the_bound() -> None:
    """TLS connections (`StreamFrames`) are bounded too, once each frame is whole."""
    memory = RequestMemory(10)
    send, receive = trio.testing.memory_stream_one_way_pair()
    reader = StreamFrames(receive, 1000, memory)
    await send.send_all(_stream([b"a" * 8, b"b" * 8]))
    with trio.fail_after(10):
        assert await reader.receive() == [b"a" * 8]
        with trio.move_on_after(0.2) as waited:
            await reader.receive()
        assert waited.cancelled_caught
        memory.release(8)
        assert await reader.receive() == [b"b" * 8]
    assert memory.queued == 8
