"""Kafka primitives: exact encodings, bounds, and compiled == interpreted on any input.

Users rely on these through every message; the bounds (5-byte varints, lengths checked against
the frame) are what stop a hostile client from making the broker allocate or loop without end.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ProtocolError
from kafkapy.protocol.primitives import (
    PRIMITIVES,
    Array,
    Frame,
    NullableStruct,
    r_tags,
    r_uvarint,
    r_varint,
    r_varlong,
    w_tags,
    w_uvarint,
    w_varint,
    w_varlong,
)


def _enc(writer: Any, value: Any) -> bytes:
    out = io.BytesIO()
    writer(out, value)
    return out.getvalue()


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (0xFFFFFFFF, b"\xff\xff\xff\xff\x0f")],
)
def test_uvarint_known_encodings(value: int, wire: bytes) -> None:
    assert _enc(w_uvarint, value) == wire
    assert r_uvarint(Frame(wire)) == value


@pytest.mark.parametrize(("value", "wire"), [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f")])
def test_varint_zigzag(value: int, wire: bytes) -> None:
    assert _enc(w_varint, value) == wire
    assert r_varint(Frame(wire)) == value


@given(st.integers(0, 2**32 - 1))
def test_uvarint_roundtrip(value: int) -> None:
    assert r_uvarint(Frame(_enc(w_uvarint, value))) == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_roundtrip(value: int) -> None:
    assert r_varint(Frame(_enc(w_varint, value))) == value


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(value: int) -> None:
    data = _enc(w_varlong, value)
    assert len(data) <= 10
    assert r_varlong(Frame(data)) == value


@pytest.mark.parametrize(
    ("reader", "wire"),
    [
        (r_uvarint, b"\x80\x80\x80\x80\x80\x01"),  # 6 bytes
        (r_uvarint, b"\xff\xff\xff\xff\x7f"),  # 35 bits
        (r_varint, b"\x80" * 51 + b"\x01"),  # construct's VarInt would accept this
        (r_varlong, b"\x80" * 10 + b"\x01"),  # 11 bytes
        (r_uvarint, b"\x80\x80"),  # truncated
        (r_uvarint, b""),
    ],
)
def test_varint_bounds(reader: Any, wire: bytes) -> None:
    with pytest.raises(ProtocolError):
        reader(Frame(wire))


def test_writers_reject_out_of_range() -> None:
    for writer, value in ((w_uvarint, -1), (w_uvarint, 2**32), (w_varint, 2**31), (w_varlong, 2**63)):
        with pytest.raises(ProtocolError):
            _enc(writer, value)


STRING_CASES = [
    (("string", False, False), "héllo", b"\x00\x06h\xc3\xa9llo"),
    (("string", False, True), None, b"\xff\xff"),
    (("string", True, False), "", b"\x01"),
    (("string", True, True), None, b"\x00"),
    (("bytes", False, False), b"", b"\x00\x00\x00\x00"),
    (("bytes", True, True), None, b"\x00"),
    (("records", False, True), b"", b"\x00\x00\x00\x00"),  # empty record set: present, not null
    (("records", True, True), b"ab", b"\x03ab"),
    (("uuid", False, False), __import__("uuid").UUID(int=1), b"\x00" * 15 + b"\x01"),
    (("bool", False, False), True, b"\x01"),
    (("float64", False, False), 1.5, b"\x3f\xf8" + b"\x00" * 6),
    (("uint16", False, False), 65535, b"\xff\xff"),
]


@pytest.mark.parametrize(("key", "value", "wire"), STRING_CASES, ids=[str(c[0]) for c in STRING_CASES])
def test_known_encodings(key: tuple[str, bool, bool], value: Any, wire: bytes) -> None:
    prim = PRIMITIVES[key]
    out = io.BytesIO()
    prim._build(value, out, None, "")
    assert out.getvalue() == wire
    compiled = prim.compile()
    out = io.BytesIO()
    compiled.buildfunc(value, out, None)
    assert out.getvalue() == wire
    assert prim._parse(Frame(wire), None, "") == value
    assert compiled.parsefunc(Frame(wire), None) == value


@pytest.mark.parametrize(
    ("key", "wire"),
    [
        (("string", False, False), b"\xff\xff"),  # null where not nullable
        (("string", False, True), b"\xff\xfe"),  # -2 length
        (("string", False, False), b"\x00\x02\xff\xfe"),  # invalid UTF-8
        (("string", False, False), b"\x7f\xff" + b"a" * 10),  # length beyond the frame
        (("bytes", False, True), b"\x7f\xff\xff\xff"),  # 2 GiB bytes in a 4-byte frame
        (("bytes", True, False), b"\x00"),  # compact null where not nullable
        (("uuid", False, False), b"\x00" * 15),
        (("int64", False, False), b"\x00" * 7),
    ],
)
def test_garbage_is_protocol_error(key: tuple[str, bool, bool], wire: bytes) -> None:
    prim = PRIMITIVES[key]
    with pytest.raises(ProtocolError):
        prim._parse(Frame(wire), None, "")
    with pytest.raises(ProtocolError):
        prim.compile().parsefunc(Frame(wire), None)


def _outcome(fn: Any, data: bytes) -> Any:
    f = Frame(data)
    try:
        return fn(f), f.tell()
    except ProtocolError:
        return "error"


ALL_CONSTRUCTS: list[Any] = [*PRIMITIVES.values()]
for compact in (False, True):
    for nullable in (False, True):
        ALL_CONSTRUCTS.append(Array(PRIMITIVES[("int32", compact, False)], compact, nullable, 4))
        ALL_CONSTRUCTS.append(Array(PRIMITIVES[("string", compact, False)], compact, nullable, 1))
    ALL_CONSTRUCTS.append(NullableStruct(PRIMITIVES[("int16", False, False)], compact))


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(ALL_CONSTRUCTS) - 1), data=st.binary(max_size=24))
def test_compiled_equals_interpreted_on_any_input(index: int, data: bytes) -> None:
    sc = ALL_CONSTRUCTS[index]
    compiled = sc.compile()
    interpreted = _outcome(lambda f: sc._parse(f, None, ""), data)
    assert _outcome(lambda f: compiled.parsefunc(f, None), data) == interpreted


def test_array_count_checked_before_building() -> None:
    arr = Array(PRIMITIVES[("int32", False, False)], False, False, 4)
    with pytest.raises(ProtocolError, match="cannot fit"):
        arr._parse(Frame(b"\x7f\xff\xff\xff" + b"\x00" * 8), None, "")
    with pytest.raises(ProtocolError, match="null"):
        arr._parse(Frame(b"\xff\xff\xff\xff"), None, "")


def test_tagged_section() -> None:
    out = io.BytesIO()
    w_tags(out, [(5, b"x")], {1: b"ab"})
    wire = out.getvalue()
    assert wire == b"\x02\x01\x02ab\x05\x01x"
    assert r_tags(Frame(wire)) == {1: b"ab", 5: b"x"}
    with pytest.raises(ProtocolError, match="out of order"):
        r_tags(Frame(b"\x02\x05\x01x\x01\x02ab"))
    with pytest.raises(ProtocolError):
        r_tags(Frame(b"\x7f\x00\x00"))  # 127 tags in 2 bytes
