"""Kafka wire primitives as bounded, compilable construct classes.

Why our own instead of construct's built-ins (measured with construct 2.10.70): compiled
construct parsers return short fields from truncated input instead of raising, `VarInt` is
unbounded (51 bytes parse to a 351-bit integer), and adapters do not compile at all. Every class
here implements `_parse/_build` *and* `_emitparse/_emitbuild`, and both paths call the same small
reader/writer functions below, so compiled and interpreted codecs agree by construction and
every malformed input surfaces as `ProtocolError`:

* a length prefix is checked against the bytes actually read, so a huge prefix costs nothing
  (``BytesIO.read`` never allocates past the end of the frame);
* an array count is checked against the bytes remaining *before* any element is built;
* unsigned varints stop at 5 bytes / 32 bits, varlongs at 10 bytes / 64 bits.

Streams are `Frame` objects (a `BytesIO` that knows where the frame ends).
"""

from __future__ import annotations

import io as _io
import struct
import uuid
from collections.abc import Callable
from typing import Any

from construct import Construct  # type: ignore[import-untyped,unused-ignore]

from kafkapy.protocol.errors import ProtocolError

__all__ = [
    "PRIMITIVES",
    "Array",
    "Frame",
    "NullableStruct",
    "Primitive",
    "remaining",
]


class Frame(_io.BytesIO):
    """A BytesIO over one frame that remembers its length, for remaining-bytes checks.

    `view` is a zero-copy memoryview of the same bytes: `records` fields are sliced from it,
    so a Produce request's batches are never copied by the decoder (BytesIO shares an
    immutable `bytes` buffer instead of copying it).
    """

    end: int
    view: memoryview

    def __init__(self, data: bytes | bytearray | memoryview = b"") -> None:
        if type(data) is bytearray:
            # BytesIO copies a bytearray for the fixed fields, but `records` are sliced from the
            # caller's bytearray itself: writable views the log patches offsets into without
            # another copy (the server receives large requests into a bytearray for this).
            super().__init__(data)
            self.view = memoryview(data)
            self.end = len(data)
            return
        if type(data) is not bytes:
            data = bytes(data)
        super().__init__(data)
        self.view = memoryview(data)
        self.end = len(data)


def remaining(io: Any) -> int:
    """Bytes left in `io` (works for plain streams too, at the cost of two seeks)."""
    end = getattr(io, "end", None)
    pos: int = io.tell()
    if end is None:
        end = io.seek(0, 2)
        io.seek(pos)
    return int(end) - pos


def _short(what: str) -> ProtocolError:
    return ProtocolError(f"truncated input while reading {what}")


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")
_u8, _i8 = _I8.unpack, _I8.pack


def r_int8(io: Any) -> int:
    try:
        return int(_I8.unpack(io.read(1))[0])
    except struct.error:
        raise _short("int8") from None


def r_int16(io: Any) -> int:
    try:
        return int(_I16.unpack(io.read(2))[0])
    except struct.error:
        raise _short("int16") from None


def r_int32(io: Any) -> int:
    try:
        return int(_I32.unpack(io.read(4))[0])
    except struct.error:
        raise _short("int32") from None


def r_int64(io: Any) -> int:
    try:
        return int(_I64.unpack(io.read(8))[0])
    except struct.error:
        raise _short("int64") from None


def r_uint16(io: Any) -> int:
    try:
        return int(_U16.unpack(io.read(2))[0])
    except struct.error:
        raise _short("uint16") from None


def r_uint32(io: Any) -> int:
    try:
        return int(_U32.unpack(io.read(4))[0])
    except struct.error:
        raise _short("uint32") from None


def r_float64(io: Any) -> float:
    try:
        return float(_F64.unpack(io.read(8))[0])
    except struct.error:
        raise _short("float64") from None


def r_bool(io: Any) -> bool:
    b = io.read(1)
    if len(b) != 1:
        raise _short("bool")
    return bool(b != b"\x00")


def r_uuid(io: Any) -> uuid.UUID:
    b = io.read(16)
    if len(b) != 16:
        raise _short("uuid")
    return uuid.UUID(bytes=bytes(b))


def _r_varbits(io: Any, max_bytes: int, max_value: int, what: str) -> int:
    result = 0
    for i in range(max_bytes):
        b = io.read(1)
        if not b:
            raise _short(what)
        byte: int = b[0]
        result |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if result > max_value:
                raise ProtocolError(f"{what} does not fit in {max_value.bit_length()} bits")
            return result
    raise ProtocolError(f"{what} longer than {max_bytes} bytes")


def r_uvarint(io: Any) -> int:
    """Unsigned varint, at most 5 bytes / 32 bits."""
    b = io.read(1)
    if b and b[0] < 0x80:  # fast path: one byte
        return int(b[0])
    if not b:
        raise _short("unsigned varint")
    io.seek(-1, 1)
    return _r_varbits(io, 5, 0xFFFFFFFF, "unsigned varint")


def r_varint(io: Any) -> int:
    """Zig-zag signed varint, at most 5 bytes / 32 bits."""
    n = _r_varbits(io, 5, 0xFFFFFFFF, "varint")
    return (n >> 1) ^ -(n & 1)


def r_varlong(io: Any) -> int:
    """Zig-zag signed varlong, at most 10 bytes / 64 bits."""
    n = _r_varbits(io, 10, 0xFFFFFFFFFFFFFFFF, "varlong")
    return (n >> 1) ^ -(n & 1)


def _r_exact(io: Any, n: int, what: str) -> bytes:
    data: bytes = io.read(n)
    if len(data) != n:
        raise ProtocolError(f"{what} of {n} bytes exceeds the {len(data)} bytes left")
    return data


def _utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"string is not valid UTF-8: {e.reason}") from None


def _null_length(n: int, nullable: bool, what: str) -> None:
    """Validate a negative length: -1 means null where allowed, anything else is garbage."""
    if n != -1:
        raise ProtocolError(f"negative {what} length {n}")
    if not nullable:
        raise ProtocolError(f"null {what} where the schema does not allow it")


def r_string(io: Any) -> str:
    n = r_int16(io)
    if n < 0:
        _null_length(n, False, "string")
    return _utf8(_r_exact(io, n, "string"))


def r_nstring(io: Any) -> str | None:
    n = r_int16(io)
    if n < 0:
        _null_length(n, True, "string")
        return None
    return _utf8(_r_exact(io, n, "string"))


def r_cstring(io: Any) -> str:
    n = r_uvarint(io) - 1
    if n < 0:
        _null_length(n, False, "string")
    return _utf8(_r_exact(io, n, "string"))


def r_cnstring(io: Any) -> str | None:
    n = r_uvarint(io) - 1
    if n < 0:
        return None
    return _utf8(_r_exact(io, n, "string"))


def r_bytes(io: Any) -> bytes:
    n = r_int32(io)
    if n < 0:
        _null_length(n, False, "bytes")
    return _r_exact(io, n, "bytes")


def r_nbytes(io: Any) -> bytes | None:
    n = r_int32(io)
    if n < 0:
        _null_length(n, True, "bytes")
        return None
    return _r_exact(io, n, "bytes")


def r_cbytes(io: Any) -> bytes:
    n = r_uvarint(io) - 1
    if n < 0:
        _null_length(n, False, "bytes")
    return _r_exact(io, n, "bytes")


def r_cnbytes(io: Any) -> bytes | None:
    n = r_uvarint(io) - 1
    if n < 0:
        return None
    return _r_exact(io, n, "bytes")


def _r_view(io: Any, n: int) -> bytes | memoryview:
    """`n` bytes as a zero-copy slice of the frame when the stream is a `Frame`."""
    view = getattr(io, "view", None)
    if view is None:
        return _r_exact(io, n, "records")
    pos = io.tell()
    if n > io.end - pos:
        raise ProtocolError(f"records of {n} bytes exceed the {io.end - pos} bytes left")
    io.seek(pos + n)
    return view[pos : pos + n]  # type: ignore[no-any-return]


def r_records(io: Any) -> bytes | memoryview:
    n = r_int32(io)
    if n < 0:
        _null_length(n, False, "records")
    return _r_view(io, n)


def r_nrecords(io: Any) -> bytes | memoryview | None:
    n = r_int32(io)
    if n < 0:
        _null_length(n, True, "records")
        return None
    return _r_view(io, n)


def r_crecords(io: Any) -> bytes | memoryview:
    n = r_uvarint(io) - 1
    if n < 0:
        _null_length(n, False, "records")
    return _r_view(io, n)


def r_cnrecords(io: Any) -> bytes | memoryview | None:
    n = r_uvarint(io) - 1
    if n < 0:
        return None
    return _r_view(io, n)


def r_exact(io: Any, n: int) -> bytes:
    """Exactly `n` bytes (a run of fixed-width fields read at once by compiled codecs)."""
    data: bytes = io.read(n)
    if len(data) != n:
        raise _short(f"{n} bytes of fixed-width fields")
    return data


def r_array_len(io: Any, nullable: bool, min_size: int) -> int:
    """int32 array count; -1 = null. Checked against the bytes left before anything is built."""
    n = r_int32(io)
    if n < 0:
        _null_length(n, nullable, "array")
        return -1
    _check_count(io, n, min_size)
    return n


def r_carray_len(io: Any, nullable: bool, min_size: int) -> int:
    """Compact (uvarint N+1) array count; 0 = null."""
    n = r_uvarint(io) - 1
    if n < 0:
        _null_length(n, nullable, "array")
        return -1
    _check_count(io, n, min_size)
    return n


#: Cap for arrays whose elements may encode to zero bytes (e.g. an empty non-flexible struct):
#: the bytes-left check cannot bound those, so a fixed limit keeps the work finite.
MAX_EMPTY_ELEMENTS = 10_000


def _check_count(io: Any, n: int, min_size: int) -> None:
    left = remaining(io)
    if min_size > 0:
        if n * min_size > left:
            raise ProtocolError(f"array of {n} elements cannot fit in the {left} bytes left")
    elif n > MAX_EMPTY_ELEMENTS + left:
        raise ProtocolError(f"array of {n} elements is implausibly large")


def r_tags(io: Any) -> dict[int, bytes]:
    """A tagged-field section: tag -> raw value bytes, tags strictly increasing."""
    count = r_uvarint(io)
    if count == 0:
        return {}
    if count * 2 > remaining(io):
        raise ProtocolError(f"{count} tagged fields cannot fit in the bytes left")
    tags: dict[int, bytes] = {}
    last = -1
    for _ in range(count):
        tag = r_uvarint(io)
        if tag <= last:
            raise ProtocolError(f"tagged field {tag} out of order or repeated")
        last = tag
        size = r_uvarint(io)
        tags[tag] = _r_exact(io, size, "tagged field")
    return tags


def r_struct_marker(io: Any) -> bool:
    """Nullable struct presence byte: negative = null."""
    return r_int8(io) >= 0


# --- writers -------------------------------------------------------------------------------


def w_int8(io: Any, v: int) -> None:
    io.write(_I8.pack(v))


def w_int16(io: Any, v: int) -> None:
    io.write(_I16.pack(v))


def w_int32(io: Any, v: int) -> None:
    io.write(_I32.pack(v))


def w_int64(io: Any, v: int) -> None:
    io.write(_I64.pack(v))


def w_uint16(io: Any, v: int) -> None:
    io.write(_U16.pack(v))


def w_uint32(io: Any, v: int) -> None:
    io.write(_U32.pack(v))


def w_float64(io: Any, v: float) -> None:
    io.write(_F64.pack(v))


def w_bool(io: Any, v: bool) -> None:
    io.write(b"\x01" if v else b"\x00")


def w_uuid(io: Any, v: uuid.UUID) -> None:
    io.write(v.bytes)


#: every one-byte unsigned varint, built once: compact lengths and counts are nearly all below
#: 127, and a flexible response writes several per element
_ONE_BYTE_UVARINTS = tuple(bytes((i,)) for i in range(0x80))


def uvarint_bytes(v: int) -> bytes:
    if 0 <= v < 0x80:
        return _ONE_BYTE_UVARINTS[v]
    if v < 0:
        raise ProtocolError(f"unsigned varint cannot hold {v}")
    if v > 0xFFFFFFFF:
        raise ProtocolError(f"unsigned varint cannot hold {v}")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varbits_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def w_uvarint(io: Any, v: int) -> None:
    io.write(uvarint_bytes(v))


def w_varint(io: Any, v: int) -> None:
    if not -(2**31) <= v < 2**31:
        raise ProtocolError(f"varint cannot hold {v}")
    io.write(_varbits_bytes(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF))


def w_varlong(io: Any, v: int) -> None:
    if not -(2**63) <= v < 2**63:
        raise ProtocolError(f"varlong cannot hold {v}")
    io.write(_varbits_bytes(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF))


def _not_null(what: str) -> ProtocolError:
    return ProtocolError(f"{what} is null but the schema does not allow null in this version")


def w_string(io: Any, v: str) -> None:
    if v is None:
        raise _not_null("string")
    data = v.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ProtocolError(f"string of {len(data)} bytes exceeds 32767")
    io.write(_I16.pack(len(data)))
    io.write(data)


def w_nstring(io: Any, v: str | None) -> None:
    if v is None:
        io.write(b"\xff\xff")
    else:
        w_string(io, v)


def w_cstring(io: Any, v: str) -> None:
    if v is None:
        raise _not_null("string")
    data = v.encode("utf-8")
    io.write(uvarint_bytes(len(data) + 1))
    io.write(data)


def w_cnstring(io: Any, v: str | None) -> None:
    if v is None:
        io.write(b"\x00")
    else:
        w_cstring(io, v)


def w_bytes(io: Any, v: bytes | memoryview) -> None:
    if v is None:
        raise _not_null("bytes")
    io.write(_I32.pack(len(v) if not isinstance(v, memoryview) else v.nbytes))
    io.write(v)


def w_nbytes(io: Any, v: bytes | memoryview | None) -> None:
    if v is None:
        io.write(b"\xff\xff\xff\xff")
    else:
        w_bytes(io, v)


def w_cbytes(io: Any, v: bytes | memoryview) -> None:
    if v is None:
        raise _not_null("bytes")
    io.write(uvarint_bytes((len(v) if not isinstance(v, memoryview) else v.nbytes) + 1))
    io.write(v)


def w_cnbytes(io: Any, v: bytes | memoryview | None) -> None:
    if v is None:
        io.write(b"\x00")
    else:
        w_cbytes(io, v)


def w_array_len(io: Any, v: list[Any] | None, nullable: bool) -> bool:
    """Write an int32 count (or -1); returns whether elements follow."""
    if v is None:
        if not nullable:
            raise _not_null("array")
        io.write(b"\xff\xff\xff\xff")
        return False
    io.write(_I32.pack(len(v)))
    return True


def w_carray_len(io: Any, v: list[Any] | None, nullable: bool) -> bool:
    if v is None:
        if not nullable:
            raise _not_null("array")
        io.write(b"\x00")
        return False
    io.write(uvarint_bytes(len(v) + 1))
    return True


def w_struct_marker(io: Any, v: object, nullable: bool) -> bool:
    if v is None:
        if not nullable:
            raise _not_null("struct")
        io.write(b"\xff")
        return False
    io.write(b"\x01")
    return True


def w_tags(io: Any, known: list[tuple[int, bytes]], unknown: dict[int, bytes]) -> None:
    """A tagged-field section: known fields that differ from their default plus preserved ones."""
    if not known and not unknown:
        io.write(b"\x00")
        return
    items = dict(unknown)
    items.update(known)
    io.write(uvarint_bytes(len(items)))
    for tag in sorted(items):
        value = items[tag]
        io.write(uvarint_bytes(tag))
        io.write(uvarint_bytes(len(value)))
        io.write(value)


def tag_value(fn: Callable[[Any, Any], object], value: object) -> bytes:
    """Encode one tagged field's value on its own, to learn its size."""
    f = _io.BytesIO()
    fn(f, value)
    return f.getvalue()


# --- construct classes ---------------------------------------------------------------------


def _import(code: Any, *names: str) -> None:
    code.append(f"from kafkapy.protocol.primitives import {', '.join(names)}")


class Primitive(Construct):  # type: ignore[misc]
    """A fixed reader/writer pair; compiles to a direct call of the same functions."""

    def __init__(
        self,
        name: str,
        reader: Callable[[Any], Any],
        writer: Callable[[Any, Any], None],
        min_size: int,
    ) -> None:
        super().__init__()
        self.kafka_type = name
        self.reader = reader
        self.writer = writer
        self.min_size = min_size

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        return self.reader(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        self.writer(stream, obj)
        return obj

    def _sizeof(self, context: Any, path: Any) -> int:
        return self.min_size

    def _emitparse(self, code: Any) -> str:
        _import(code, self.reader.__name__)
        return f"{self.reader.__name__}(io)"

    def _emitbuild(self, code: Any) -> str:
        _import(code, self.writer.__name__)
        return f"({self.writer.__name__}(io, obj), obj)[1]"


def _prim(name: str, r: Callable[[Any], Any], w: Callable[[Any, Any], None], size: int) -> Primitive:
    return Primitive(name, r, w, size)


#: (kafka type, compact?, nullable?) -> construct. `records` decode to zero-copy memoryviews.
PRIMITIVES: dict[tuple[str, bool, bool], Primitive] = {}
for _flex in (False, True):
    for _null in (False, True):
        PRIMITIVES[("bool", _flex, _null)] = _prim("bool", r_bool, w_bool, 1)
        PRIMITIVES[("int8", _flex, _null)] = _prim("int8", r_int8, w_int8, 1)
        PRIMITIVES[("int16", _flex, _null)] = _prim("int16", r_int16, w_int16, 2)
        PRIMITIVES[("int32", _flex, _null)] = _prim("int32", r_int32, w_int32, 4)
        PRIMITIVES[("int64", _flex, _null)] = _prim("int64", r_int64, w_int64, 8)
        PRIMITIVES[("uint16", _flex, _null)] = _prim("uint16", r_uint16, w_uint16, 2)
        PRIMITIVES[("uint32", _flex, _null)] = _prim("uint32", r_uint32, w_uint32, 4)
        PRIMITIVES[("float64", _flex, _null)] = _prim("float64", r_float64, w_float64, 8)
        PRIMITIVES[("uuid", _flex, _null)] = _prim("uuid", r_uuid, w_uuid, 16)
        PRIMITIVES[("varint", _flex, _null)] = _prim("varint", r_varint, w_varint, 1)
        PRIMITIVES[("varlong", _flex, _null)] = _prim("varlong", r_varlong, w_varlong, 1)
        PRIMITIVES[("uvarint", _flex, _null)] = _prim("uvarint", r_uvarint, w_uvarint, 1)
PRIMITIVES[("string", False, False)] = _prim("string", r_string, w_string, 2)
PRIMITIVES[("string", False, True)] = _prim("string", r_nstring, w_nstring, 2)
PRIMITIVES[("string", True, False)] = _prim("string", r_cstring, w_cstring, 1)
PRIMITIVES[("string", True, True)] = _prim("string", r_cnstring, w_cnstring, 1)
PRIMITIVES[("bytes", False, False)] = _prim("bytes", r_bytes, w_bytes, 4)
PRIMITIVES[("bytes", False, True)] = _prim("bytes", r_nbytes, w_nbytes, 4)
PRIMITIVES[("bytes", True, False)] = _prim("bytes", r_cbytes, w_cbytes, 1)
PRIMITIVES[("bytes", True, True)] = _prim("bytes", r_cnbytes, w_cnbytes, 1)
PRIMITIVES[("records", False, False)] = _prim("records", r_records, w_bytes, 4)
PRIMITIVES[("records", False, True)] = _prim("records", r_nrecords, w_nbytes, 4)
PRIMITIVES[("records", True, False)] = _prim("records", r_crecords, w_cbytes, 1)
PRIMITIVES[("records", True, True)] = _prim("records", r_cnrecords, w_cnbytes, 1)

#: struct format letters of the fixed-width types; compiled struct codecs read and write a run
#: of consecutive fixed-width fields with one precompiled `struct.Struct`.
FIXED_FORMATS: dict[str, str] = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint16": "H", "uint32": "I", "float64": "d",
}


class Array(Construct):  # type: ignore[misc]
    """(Compact)(nullable) array of `subcon`, count bounded by the bytes left in the frame."""

    def __init__(self, subcon: Any, compact: bool, nullable: bool, min_elem_size: int) -> None:
        super().__init__()
        self.subcon = subcon
        self.compact = compact
        self.nullable = nullable
        self.min_elem_size = min_elem_size
        self.min_size = 1 if compact else 4
        self._rlen = r_carray_len if compact else r_array_len
        self._wlen = w_carray_len if compact else w_array_len

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        n = self._rlen(stream, self.nullable, self.min_elem_size)
        if n < 0:
            return None
        sub = self.subcon
        return [sub._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if self._wlen(stream, obj, self.nullable):
            sub = self.subcon
            for item in obj:
                sub._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        fname = f"parse_array_{code.allocateId()}"
        rlen = self._rlen.__name__
        _import(code, rlen)
        code.append(f"""
            def {fname}(io, this):
                n = {rlen}(io, {self.nullable}, {self.min_elem_size})
                if n < 0:
                    return None
                return [{self.subcon._compileparse(code)} for _ in range(n)]
        """)
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        fname = f"build_array_{code.allocateId()}"
        wlen = self._wlen.__name__
        _import(code, wlen)
        code.append(f"""
            def {fname}(obj, io, this):
                items = obj
                if {wlen}(io, items, {self.nullable}):
                    for obj in items:
                        {self.subcon._compilebuild(code)}
                return items
        """)
        return f"{fname}(obj, io, this)"


class NullableStruct(Construct):  # type: ignore[misc]
    """A single (non-array) struct field: a presence byte (-1 null / 1 present) when nullable."""

    def __init__(self, subcon: Any, nullable: bool) -> None:
        super().__init__()
        self.subcon = subcon
        self.nullable = nullable

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        if self.nullable and not r_struct_marker(stream):
            return None
        return self.subcon._parse(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        if not self.nullable:
            if obj is None:
                raise _not_null("struct")
            return self.subcon._build(obj, stream, context, path)
        if w_struct_marker(stream, obj, True):
            self.subcon._build(obj, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        if not self.nullable:
            return str(self.subcon._compileparse(code))
        _import(code, "r_struct_marker")
        return f"({self.subcon._compileparse(code)} if r_struct_marker(io) else None)"

    def _emitbuild(self, code: Any) -> str:
        if not self.nullable:
            return str(self.subcon._compilebuild(code))
        _import(code, "w_struct_marker")
        return (
            f"(({self.subcon._compilebuild(code)}) if w_struct_marker(io, obj, {self.nullable})"
            " else obj)"
        )
