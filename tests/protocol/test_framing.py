"""FrameDecoder: frames come out whole however the bytes arrive; bad sizes fail before buffering."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import FrameDecoder, ProtocolError
from kafkapy.protocol.framing import FrameSizeError, foreign_protocol


def _wire(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(st.binary(max_size=40), max_size=6), data=st.data())
def test_random_chunks(frames: list[bytes], data: st.DataObject) -> None:
    wire = _wire(frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(wire)), max_size=8)))
    dec = FrameDecoder(1024)
    out: list[bytes] = []
    prev = 0
    for cut in [*cuts, len(wire)]:
        out += dec.feed(wire[prev:cut])
        prev = cut
    assert out == frames
    assert dec.buffered == 0


@given(frames=st.lists(st.binary(max_size=10), max_size=4))
def test_byte_by_byte(frames: list[bytes]) -> None:
    wire = _wire(frames)
    dec = FrameDecoder(64)
    out: list[bytes] = []
    for i in range(len(wire)):
        out += dec.feed(wire[i : i + 1])
    assert out == frames


@pytest.mark.parametrize("size", [0x7FFFFFFF, 0x80000000 - 2, -1, -(2**31), 1025])
def test_bad_size_rejected_before_buffering(size: int) -> None:
    dec = FrameDecoder(1024)
    assert dec.feed(struct.pack(">i", 5) + b"hello") == [b"hello"]
    with pytest.raises(ProtocolError, match="frame size"):
        dec.feed(struct.pack(">I", size & 0xFFFFFFFF))
    assert dec.buffered == 0


def test_size_prefix_split_across_feeds_and_limit_inclusive() -> None:
    dec = FrameDecoder(4)
    assert dec.feed(b"\x00\x00") == []
    assert dec.feed(b"\x00\x04ab") == []
    assert dec.feed(b"cd\x00\x00\x00\x00") == [b"abcd", b""]
    with pytest.raises(ProtocolError):
        dec.feed(b"\x00\x00\x00\x05")


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_requests_survive_framing(data: st.DataObject) -> None:
    from kafkapy.protocol import RequestHeader, decode_request, encode_request

    from .strategies import all_versions, message_strategy

    requests = [case for case in all_versions() if case[2]]
    sent = []
    for i in range(data.draw(st.integers(1, 3), label="count")):
        api_key, version, _ = data.draw(st.sampled_from(requests), label="api")
        msg = data.draw(message_strategy(api_key, version, True))
        sent.append((RequestHeader(api_key, version, i, "c"), msg))
    wire = _wire([encode_request(h, m) for h, m in sent])
    dec = FrameDecoder(1 << 20)
    got = []
    pos = 0
    while pos < len(wire):
        step = data.draw(st.integers(1, 64), label="chunk")
        got += [decode_request(f) for f in dec.feed(wire[pos : pos + step])]
        pos += step
    assert got == sent


@pytest.mark.parametrize(
    ("first", "foreign", "hint"),
    [
        (b"GET / HTTP/1.1\r\n", "HTTP", "not a Kafka client"),
        (b"PRI * HTTP/2.0\r\n", "HTTP/2", "not a Kafka client"),
        (bytes.fromhex("16030100c8"), "TLS", "TLS client on a plaintext listener"),
        (b"\x7f\xff\xff\xff", None, None),
    ],
)
def test_an_oversized_prefix_names_the_protocol_it_looks_like(
    first: bytes, foreign: str | None, hint: str | None
) -> None:
    with pytest.raises(FrameSizeError) as caught:
        FrameDecoder(max_frame_bytes=1024).feed(first)
    assert caught.value.foreign == foreign
    assert caught.value.reason.startswith("frame size ")
    if hint is not None:
        assert hint in caught.value.reason
    assert foreign_protocol(first[:4]) == foreign
