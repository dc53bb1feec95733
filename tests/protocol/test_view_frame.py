"""Large bytearray request frames decode without a copy, and exactly as `bytes` frames do.

The server receives a large request (a produce of record batches) into a bytearray of its own;
`decode_request` reads it through `_ViewFrame` instead of copying it into a BytesIO. Users rely
on the two paths agreeing on every frame - same message, or the same `ProtocolError` for bad
bytes - and on `records` being views of the received frame (the log patches offsets in place).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ProtocolError, RequestHeader, decode_request, encode_request
from kafkapy.protocol.codec import VIEW_FRAME_BYTES, _ViewFrame
from kafkapy.protocol.messages import SCHEMAS, ProduceRequest

from .strategies import message_def, message_strategy

KEYS = sorted(SCHEMAS)


def _outcome(frame: bytes | bytearray) -> object:
    try:
        return decode_request(frame)
    except ProtocolError as e:
        return ("error", type(e))


@pytest.fixture
def view_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every bytearray frame through `_ViewFrame`, small ones included."""
    monkeypatch.setattr("kafkapy.protocol.codec.VIEW_FRAME_BYTES", 0)


@pytest.mark.usefixtures("view_always")
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_bytearray_and_bytes_frames_decode_alike(data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(KEYS), label="api_key")
    lo, hi = message_def(key, True).valid
    version = data.draw(st.integers(lo, hi), label="version")
    msg = data.draw(message_strategy(key, version, True))
    wire = encode_request(
        RequestHeader(key, version, 7, data.draw(st.none() | st.text(max_size=5))), msg
    )
    cut = data.draw(st.integers(0, len(wire)), label="cut")
    flips = data.draw(
        st.lists(st.tuples(st.integers(0, max(len(wire) - 1, 0)), st.integers(0, 255)), max_size=3)
    )
    mutated = bytearray(wire[:cut])
    for pos, value in flips:
        if pos < len(mutated):
            mutated[pos] = value
    assert _outcome(bytearray(wire)) == _outcome(bytes(wire))
    assert _outcome(mutated) == _outcome(bytes(mutated))


def _produce_frame(records: bytes) -> bytes:
    body = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    return encode_request(RequestHeader(0, 9, 1, "c"), body)


def test_large_produce_records_are_views_of_the_received_frame() -> None:
    records = bytes(range(256)) * (VIEW_FRAME_BYTES // 256 + 1)
    frame = bytearray(_produce_frame(records))
    _, msg = decode_request(frame)
    view = msg.topic_data[0].partition_data[0].records
    assert bytes(view) == records
    assert isinstance(view, memoryview)
    assert view.obj is frame  # no copy: the frame itself
    view[0] = 0xAB  # writable: offsets are patched in place
    assert frame.find(b"\xab\x01\x02\x03") >= 0


def test_large_truncated_produce_frame_is_a_protocol_error() -> None:
    frame = _produce_frame(b"x" * (2 * VIEW_FRAME_BYTES))
    for cut in (len(frame) - 1, len(frame) // 2, VIEW_FRAME_BYTES):
        with pytest.raises(ProtocolError):
            decode_request(bytearray(frame[:cut]))


def test_view_frame_reads_and_seeks_like_bytesio() -> None:
    io = _ViewFrame(bytearray(b"abcdef"))
    assert io.read(2) == b"ab"
    assert io.tell() == 2
    assert io.seek(-1, 1) == 1
    assert io.read(10) == b"bcdef"
    assert io.read(1) == b""
    assert io.tell() == 6
    assert io.seek(0) == 0
    assert io.read() == b"abcdef"
    with pytest.raises(ValueError, match="negative seek"):
        io.seek(-7, 2)
