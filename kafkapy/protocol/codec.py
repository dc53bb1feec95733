"""Request/response codecs: construct structs built per (API, version, direction), cached.

Why built lazily from the generated schema tables: a broker process only ever meets a handful
of (API, version) pairs, so compiling all ~1,000 of them up front would waste start-up time.
Each struct codec is compiled with construct's `compile()` (our primitives all implement
`_emitparse/_emitbuild`, so the compiled module never calls back into the interpreter) and the
generated parser builds the message dataclass directly: no intermediate `Container`.

Boundary rule (after h11): every decode function either returns a message or raises
`ProtocolError`; any other exception escaping the codec is converted here, never leaked.
"""

from __future__ import annotations

import dataclasses
import importlib
import io as _io
import struct
from collections.abc import Callable
from typing import Any

from construct import Construct  # type: ignore[import-untyped,unused-ignore]

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ProtocolError, UnsupportedVersionError
from kafkapy.protocol.headers import (
    RequestHeader,
    request_header_version,
    response_header_version,
)
from kafkapy.protocol.messages import APIS, SCHEMAS
from kafkapy.protocol.primitives import (
    FIXED_FORMATS,
    PRIMITIVES,
    Array,
    Frame,
    NullableStruct,
    Primitive,
    r_int16,
    r_int32,
    r_nstring,
    r_tags,
    tag_value,
    w_int16,
    w_int32,
    w_nstring,
    w_tags,
)
from kafkapy.protocol.produce_fast import decode_produce_request, encode_produce_response
from kafkapy.protocol.schema import F, MessageDef, S, in_range

__all__ = [
    "SUPPORTED_VERSIONS",
    "RequestHeader",
    "StructCodec",
    "decode_body",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_body",
    "encode_request",
    "encode_response",
    "message_codec",
    "request_header_version",
    "response_header_version",
]

#: Min/max version the codec speaks per API (the full range of the project's specs); read from
#: `APIS`, so no API's classes are built for it.
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey(key): api.valid for key, api in sorted(APIS.items())
}

Message = Any


class StructCodec(Construct):  # type: ignore[misc]
    """One struct at one version: regular fields in order, then (flexible) a tagged section.

    Tagged fields are written only when their value differs from the default, because
    librdkafka before 2.2 misparses default-valued tagged fields in ApiVersions responses.
    Unknown tags are kept in `unknown_tagged_fields` and written back on encode.
    """

    def __init__(self, sdef: S, version: int, flexible: bool) -> None:
        super().__init__()
        self.cls = sdef.cls
        self.flexible = flexible
        self.regular: list[tuple[str, Any]] = []
        self.tagged: list[tuple[int, str, Any]] = []
        proto = sdef.cls()
        defaults: list[Any] = []
        for f in sdef.fields:
            if flexible and f.tag is not None and in_range(version, f.tagged):
                self.tagged.append((f.tag, f.attr, _field_construct(f, version, flexible)))
                defaults.append(getattr(proto, f.attr))
            elif in_range(version, f.versions):
                self.regular.append((f.attr, _field_construct(f, version, flexible)))
        self.tagged.sort(key=lambda item: item[0])
        self.defaults = defaults
        self.min_size = sum(_min_size(sc) for _, sc in self.regular) + (1 if flexible else 0)
        self.packers: list[struct.Struct]

    def _parse(self, stream: Any, context: Any, path: Any) -> Any:
        obj = self.cls(**{attr: sc._parse(stream, context, path) for attr, sc in self.regular})
        if self.flexible:
            tags = r_tags(stream)
            if tags:
                for tag, attr, sc in self.tagged:
                    data = tags.pop(tag, None)
                    if data is not None:
                        setattr(obj, attr, sc._parse(Frame(data), context, path))
                obj.unknown_tagged_fields = tags
        return obj

    def _build(self, obj: Any, stream: Any, context: Any, path: Any) -> Any:
        for attr, sc in self.regular:
            sc._build(getattr(obj, attr), stream, context, path)
        if self.flexible:
            known: list[tuple[int, bytes]] = []
            for (tag, attr, sc), default in zip(self.tagged, self.defaults, strict=True):
                value = getattr(obj, attr)
                if value != default:
                    known.append((tag, tag_value(_builder(sc, context, path), value)))
            w_tags(stream, known, obj.unknown_tagged_fields)
        return obj

    def _runs(self) -> list[tuple[str | None, list[tuple[str, Any]]]]:
        """Regular fields split into runs: (struct format, fields) for consecutive fixed-width
        primitives, (None, [field]) for everything else."""
        runs: list[tuple[str | None, list[tuple[str, Any]]]] = []
        for attr, sc in self.regular:
            fmt = FIXED_FORMATS.get(sc.kafka_type) if isinstance(sc, Primitive) else None
            prev_fmt = runs[-1][0] if runs else None
            if fmt is not None and prev_fmt is not None:
                runs[-1] = (prev_fmt + fmt, [*runs[-1][1], (attr, sc)])
            elif fmt is not None:
                runs.append((fmt, [(attr, sc)]))
            else:
                runs.append((None, [(attr, sc)]))
        return runs

    def _packers(self) -> list[struct.Struct]:
        if not hasattr(self, "packers"):
            self.packers = [struct.Struct(">" + fmt) for fmt, _ in self._runs() if fmt is not None]
        return self.packers

    def _emitparse(self, code: Any) -> str:
        ident = id(self)
        code.linkedinstances[ident] = self
        self._packers()
        fname = f"parse_struct_{code.allocateId()}"
        lines = [f"def {fname}(io, this):", f"    me = linkedinstances[{ident}]"]
        code.append("from kafkapy.protocol.primitives import r_exact")
        names: list[str] = []
        k = 0
        for fmt, fields in self._runs():
            local = [f"v{len(names) + i}" for i in range(len(fields))]
            names += local
            if fmt is None:
                lines.append(f"    {local[0]} = {fields[0][1]._compileparse(code)}")
            else:
                size = self.packers[k].size
                target = ", ".join(local) + ("," if len(local) == 1 else "")
                lines.append(f"    {target} = me.packers[{k}].unpack(r_exact(io, {size}))")
                k += 1
        args = ", ".join(f"{attr}={n}" for (attr, _), n in zip(self.regular, names, strict=True))
        lines.append(f"    obj = me.cls({args})")
        if self.flexible:
            code.append("from kafkapy.protocol.primitives import r_tags, Frame")
            # Fast path: almost every section is the single byte 0 (no tagged fields).
            lines += [
                "    t = io.read(1)",
                "    if t != b'\\x00':",
                "        io.seek(-len(t), 1)",
                "        tags = r_tags(io)",
            ]
            for tag, attr, sc in self.tagged:
                lines += [
                    f"        data = tags.pop({tag}, None)",
                    "        if data is not None:",
                    f"            obj.{attr} = (lambda io: {sc._compileparse(code)})(Frame(data))",
                ]
            lines.append("        obj.unknown_tagged_fields = tags")
        lines.append("    return obj")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        ident = id(self)
        code.linkedinstances[ident] = self
        self._packers()
        fname = f"build_struct_{code.allocateId()}"
        lines = [
            f"def {fname}(obj, io, this):",
            "    msg = obj",
            f"    me = linkedinstances[{ident}]",
        ]
        k = 0
        for fmt, fields in self._runs():
            if fmt is None:
                attr, sc = fields[0]
                lines += [f"    obj = msg.{attr}", f"    {sc._compilebuild(code)}"]
            else:
                args = ", ".join(f"msg.{attr}" for attr, _ in fields)
                lines.append(f"    io.write(me.packers[{k}].pack({args}))")
                k += 1
        if self.flexible:
            code.append("from kafkapy.protocol.primitives import w_tags, tag_value")
            lines.append("    known = []")
            for i, (tag, attr, sc) in enumerate(self.tagged):
                lines += [
                    f"    obj = msg.{attr}",
                    f"    if obj != me.defaults[{i}]:",
                    f"        known.append(({tag}, tag_value(lambda io, obj: {sc._compilebuild(code)}, obj)))",
                ]
            lines += [
                "    if known or msg.unknown_tagged_fields:",
                "        w_tags(io, known, msg.unknown_tagged_fields)",
                "    else:",
                "        io.write(b'\\x00')",
            ]
        lines.append("    return msg")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"


def _builder(sc: Any, context: Any, path: Any) -> Callable[[Any, Any], object]:
    def build(stream: Any, value: Any) -> object:
        return sc._build(value, stream, context, path)

    return build


def _min_size(sc: Any) -> int:
    if isinstance(sc, NullableStruct):
        return 1 if sc.nullable else _min_size(sc.subcon)
    return int(getattr(sc, "min_size", 0))


def _field_construct(f: F, version: int, flexible: bool) -> Any:
    compact = in_range(version, f.flexible) if f.flexible_override else flexible
    nullable = in_range(version, f.nullable)
    if f.type == "struct":
        assert f.struct is not None
        elem: Any = StructCodec(f.struct, version, flexible)
        if f.array:
            return Array(elem, compact, nullable, elem.min_size)
        return NullableStruct(elem, nullable)
    if f.array:
        prim = PRIMITIVES[(f.type, compact, False)]
        return Array(prim, compact, nullable, prim.min_size)
    return PRIMITIVES[(f.type, compact, nullable)]


@dataclasses.dataclass(slots=True)
class _Codec:
    name: str
    parse: Callable[[Any, Any], Any]
    build: Callable[[Any, Any], Any]
    #: the message class this codec encodes (`encode_*` refuses any other type)
    cls: type[Any]


_CACHE: dict[tuple[int, int, bool, bool], _Codec] = {}


def _check_version(api_key: int, version: int) -> None:
    """`UnsupportedVersionError` unless the codec speaks this API at this version (reads `APIS`
    only, so a request for an API nobody used yet is refused without loading its classes)."""
    api = APIS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"unknown API key {api_key}")
    if not in_range(version, api.valid):
        raise UnsupportedVersionError(
            f"{api.name} v{version} is not supported (versions {api.valid[0]}-{api.valid[1]})"
        )


def _message_def(api_key: int, version: int, request: bool) -> tuple[str, MessageDef]:
    _check_version(api_key, version)
    api = SCHEMAS[api_key]
    mdef = api.request if request else api.response
    return f"{api.name}{'Request' if request else 'Response'} v{version}", mdef


def message_codec(api_key: int, version: int, request: bool, *, compiled: bool = True) -> _Codec:
    """The (cached) codec for one message; `compiled=False` gives the interpreted twin."""
    key = (api_key, version, request, compiled)
    codec = _CACHE.get(key)
    if codec is not None:
        return codec
    name, mdef = _message_def(api_key, version, request)
    top = StructCodec(mdef.struct, version, in_range(version, mdef.flexible))
    if compiled:
        c = top.compile()
        build_all: Callable[[Any, Any, Any], Any] = c.buildfunc

        def build(obj: Any, io: Any) -> Any:
            return build_all(obj, io, None)

        codec = _Codec(name, c.parsefunc, build, mdef.struct.cls)
    else:

        def parse_i(io: Any, this: Any) -> Any:
            return top._parse(io, this, "(parsing)")

        def build_i(obj: Any, io: Any) -> Any:
            return top._build(obj, io, None, "(building)")

        codec = _Codec(name, parse_i, build_i, mdef.struct.cls)
    _CACHE[key] = codec
    return codec


def _parse_body(codec: _Codec, io: Frame, strict: bool = True) -> Message:
    try:
        msg = codec.parse(io, None)
    except ProtocolError as e:
        raise type(e)(f"{codec.name}: {e.reason}", e.error_code) from None
    except Exception as e:  # the boundary: nothing but ProtocolError escapes a decoder
        raise ProtocolError(f"{codec.name}: malformed input ({type(e).__name__}: {e})") from e
    left = io.end - io.tell()
    if left and strict:
        raise ProtocolError(f"{codec.name}: {left} unexpected bytes after the message")
    return msg


def _build_body(codec: _Codec, msg: Message, io: _io.BytesIO) -> None:
    try:
        codec.build(msg, io)
    except ProtocolError as e:
        raise type(e)(f"{codec.name}: {e.reason}", e.error_code) from None
    except Exception as e:
        raise ProtocolError(f"{codec.name}: cannot encode ({type(e).__name__}: {e})") from e


def decode_body(
    api_key: int, version: int, request: bool, data: bytes, *, compiled: bool = True
) -> Message:
    """Decode a bare message body (no header)."""
    return _parse_body(message_codec(api_key, version, request, compiled=compiled), Frame(data))


def encode_body(
    api_key: int, version: int, request: bool, msg: Message, *, compiled: bool = True
) -> bytes:
    """Encode a bare message body (no header)."""
    codec = message_codec(api_key, version, request, compiled=compiled)
    _check_type(codec, msg)
    out = _io.BytesIO()
    _build_body(codec, msg, out)
    return out.getvalue()


def _check_type(codec: _Codec, msg: Message) -> None:
    if type(msg) is not codec.cls:
        raise TypeError(f"expected {codec.cls.__name__}, got {type(msg).__name__}")


# --- headers (kafkapy.protocol.headers) ---------------------------------------------------


def _read_request_header(io: Frame) -> RequestHeader:
    try:
        api_key, api_version, correlation_id = r_int16(io), r_int16(io), r_int32(io)
        version = request_header_version(api_key, api_version)
        header = RequestHeader(
            api_key, api_version, correlation_id, r_nstring(io) if version >= 1 else None
        )
        if version >= 2:
            header.unknown_tagged_fields = r_tags(io)
    except ProtocolError as e:
        raise ProtocolError(f"request header: {e.reason}") from None
    return header


def decode_request_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Read only the header, for any API key/version (so the server can answer or close)."""
    return _read_request_header(Frame(frame))


class _ViewFrame:
    """`Frame`'s reading interface over a bytearray, without copying it.

    Why: `Frame` is a BytesIO, which copies a bytearray whole to read the fixed fields - for a
    produce request (received into a bytearray of its own, see `Connection`) one more copy of
    every produced byte, though all but a few dozen bytes are `records`, sliced from `view`
    anyway. Reading through Python methods costs about as much per field as copying ~10 KiB, so
    `decode_request` uses this only for frames of at least `VIEW_FRAME_BYTES`."""

    __slots__ = ("_pos", "end", "view")

    def __init__(self, data: bytearray) -> None:
        self.view = memoryview(data)
        self.end = len(data)
        self._pos = 0

    def read(self, n: int = -1) -> bytes:
        pos = self._pos
        stop = self.end if n is None or n < 0 else min(pos + n, self.end)
        self._pos = max(stop, pos)
        return bytes(self.view[pos:stop])

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = 0 if whence == 0 else self._pos if whence == 1 else self.end
        pos = base + offset
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos


#: bytearray frames this big are decoded through `_ViewFrame` (no copy); smaller ones through
#: `Frame`, whose C reads beat Python method calls when the copy is cheap.
VIEW_FRAME_BYTES = 16 * 1024


#: Off only in tests (the generic codec as the reference) and A/B measurements.
FAST_PATHS = True
_FAST_FRAME_TYPES = (bytes, bytearray)
#: the fast path for a request's API key (its first two bytes): produce_fast, fetch_fast
_FAST_DECODERS: dict[bytes, Callable[[bytes | bytearray], tuple[RequestHeader, Message] | None]] = {
    b"\x00\x00": decode_produce_request,
}
#: fast paths loaded with their API's first request, as its message classes are (Produce's
#: module is imported with the codec); `(module, function)` per key, moved to the table above
_LAZY_FAST_DECODERS: dict[bytes, tuple[str, str]] = {
    b"\x00\x01": ("kafkapy.protocol.fetch_fast", "decode_fetch_request"),
    b"\x00\x0c": ("kafkapy.protocol.heartbeat_fast", "decode_heartbeat_request"),
}
_LAZY_FAST_ENCODERS: dict[int, tuple[str, str]] = {
    ApiKey.HEARTBEAT: ("kafkapy.protocol.heartbeat_fast", "encode_heartbeat_response"),
}


def _version_known(frame: bytes | bytearray | memoryview) -> bool:
    """The frame names a version the codec speaks: a refused request loads no fast path."""
    if len(frame) < 4:
        return False
    api_key, version = struct.unpack_from(">hh", frame)
    api = APIS.get(api_key)
    return api is not None and in_range(version, api.valid)


def _load_fast(table: dict[Any, Any], lazy: dict[Any, tuple[str, str]], key: object) -> Any:
    """The fast path `lazy` names for `key`, imported and kept in `table` from now on."""
    module, name = lazy.pop(key)
    function = getattr(importlib.import_module(module), name)
    table[key] = function
    return function


def decode_request(
    frame: bytes | bytearray | memoryview, *, strict: bool = False
) -> tuple[RequestHeader, Message]:
    """Header plus body. `UnsupportedVersionError` for unknown key/version.

    Bytes after the body are ignored unless `strict`, as Kafka's broker ignores them: librdkafka
    (2.16 here) sends flexible Metadata requests for all topics with 3 stray trailing bytes.
    """
    if FAST_PATHS and not strict and type(frame) in _FAST_FRAME_TYPES:
        key = bytes(frame[:2])
        fast_decode = _FAST_DECODERS.get(key)
        if fast_decode is None and key in _LAZY_FAST_DECODERS and _version_known(frame):
            fast_decode = _load_fast(_FAST_DECODERS, _LAZY_FAST_DECODERS, key)
        if fast_decode is not None:
            fast = fast_decode(frame)  # type: ignore[arg-type]
            if fast is not None:
                return fast
    io: Any = (
        _ViewFrame(frame)
        if type(frame) is bytearray and len(frame) >= VIEW_FRAME_BYTES
        else Frame(frame)
    )
    if FAST_PATHS and type(frame) in _FAST_FRAME_TYPES:
        known = _known_header(frame, io)  # type: ignore[arg-type]
        if known is not None:
            header, codec = known
            return header, _parse_body(codec, io, strict)
    if io.end >= 4:  # unsupported key/version wins over a malformed rest of the header
        _check_version(r_int16(io), r_int16(io))
        io.seek(0)
    header = _read_request_header(io)
    codec = message_codec(header.api_key, header.api_version, True)
    header_version = request_header_version(header.api_key, header.api_version)
    if header_version >= 1:  # a v0 header has no client id
        _KNOWN[(header.api_key, header.api_version)] = (codec, header_version >= 2)
    return header, _parse_body(codec, io, strict)


#: (api key, version) of requests decoded before: their codec and whether the header has a
#: tagged section - so the next one's header is read with one unpack and no version checks
_KNOWN: dict[tuple[int, int], tuple[_Codec, bool]] = {}
_HEAD = struct.Struct(">hhih")  # api key, version, correlation id, client id length


def _known_header(frame: bytes | bytearray, io: Any) -> tuple[RequestHeader, _Codec] | None:
    """The header of a request whose key and version were decoded before, with `io` left at
    its body; None (and `io` untouched) for anything else, which the general path reads - and
    refuses with its own error when malformed (a null client id, too short, bad tags)."""
    if len(frame) < 10:
        return None
    api_key, api_version, correlation_id, n = _HEAD.unpack_from(frame)
    known = _KNOWN.get((api_key, api_version))
    if known is None or n < 0 or 10 + n > len(frame):
        return None
    try:
        client_id = str(frame[10 : 10 + n], "utf-8")
    except UnicodeDecodeError:
        return None
    codec, tagged = known
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if tagged and 10 + n < len(frame) and frame[10 + n] == 0:  # the usual empty tagged section
        io.seek(11 + n)
        return header, codec
    io.seek(10 + n)
    if tagged:
        try:
            header.unknown_tagged_fields = r_tags(io)
        except ProtocolError:
            io.seek(0)
            return None
    return header, codec


def encode_request(header: RequestHeader, msg: Message) -> bytes:
    """Header (v1/v2 as the version requires) plus body, without the size prefix."""
    codec = message_codec(header.api_key, header.api_version, True)
    _check_type(codec, msg)
    out = _io.BytesIO()
    w_int16(out, header.api_key)
    w_int16(out, header.api_version)
    w_int32(out, header.correlation_id)
    w_nstring(out, header.client_id)
    if request_header_version(header.api_key, header.api_version) >= 2:
        w_tags(out, [], header.unknown_tagged_fields)
    _build_body(codec, msg, out)
    return out.getvalue()


#: the fast path for a response of an API key: produce_fast, heartbeat_fast
_FAST_ENCODERS: dict[int, Callable[[int, int, object], bytes | None]] = {
    ApiKey.PRODUCE: encode_produce_response,
}


def encode_response(api_key: int, api_version: int, correlation_id: int, msg: Message) -> bytes:
    """Response header (v0, or v1 when flexible; ApiVersions always v0) plus body."""
    if FAST_PATHS:
        fast_encode = _FAST_ENCODERS.get(api_key)
        if fast_encode is None and api_key in _LAZY_FAST_ENCODERS:
            fast_encode = _load_fast(_FAST_ENCODERS, _LAZY_FAST_ENCODERS, api_key)
        if fast_encode is not None:
            fast = fast_encode(api_version, correlation_id, msg)
            if fast is not None:
                return fast
    known = _RESPONSES.get((api_key, api_version))
    if known is None:
        codec = message_codec(api_key, api_version, False)
        tagged = b"\x00" if response_header_version(api_key, api_version) else b""
        known = _RESPONSES[(api_key, api_version)] = (codec, tagged)
    codec, tagged = known
    _check_type(codec, msg)
    out = _io.BytesIO()
    w_int32(out, correlation_id)
    if tagged:
        out.write(tagged)
    _build_body(codec, msg, out)
    return out.getvalue()


#: (api key, version) of responses encoded before: their codec and their header's empty tagged
#: section (b"" for a v0 header)
_RESPONSES: dict[tuple[int, int], tuple[_Codec, bytes]] = {}


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, Message]:
    """Decode a response frame for a request we sent: (correlation_id, message)."""
    codec = message_codec(api_key, api_version, False)
    io = Frame(frame)
    try:
        correlation_id = r_int32(io)
        if response_header_version(api_key, api_version):
            r_tags(io)
    except ProtocolError as e:
        raise ProtocolError(f"response header: {e.reason}") from None
    return correlation_id, _parse_body(codec, io)
