"""Request headers of a key and version decoded before (`codec._known_header`) against the
generic reader.

What users rely on: the second Heartbeat or Metadata of a connection decodes exactly as the
first - same header (client id, tagged fields), same body - and a malformed one still ends in
the generic path's ProtocolError, never in a different answer. (A Heartbeat the fast path
`heartbeat_fast` reads is compared the same way: a header with tags falls back to this path.)
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, RequestHeader, codec, decode_request, encode_request
from kafkapy.protocol.errors import ProtocolError
from tests.protocol.strategies import message_strategy

_SHAPES = [(ApiKey.HEARTBEAT, v) for v in range(5)] + [(ApiKey.METADATA, v) for v in (0, 4, 9, 12)]
_text = st.one_of(st.none(), st.text(st.characters(codec="utf-8"), max_size=40))


def _generic(frame: bytes | bytearray) -> object:
    codec.FAST_PATHS = False
    try:
        return decode_request(frame)
    except ProtocolError as e:
        return e
    finally:
        codec.FAST_PATHS = True


def _decoded(frame: bytes | bytearray) -> object:
    try:
        return decode_request(frame)
    except ProtocolError as e:
        return e


@settings(max_examples=300, deadline=None)
@given(
    data=st.data(),
    shape=st.sampled_from(_SHAPES),
    client_id=_text,
    tags=st.dictionaries(st.integers(0, 5), st.binary(max_size=4), max_size=2),
    mangle=st.sampled_from(["none", "cut", "flip", "junk"]),
    where=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=4),
    as_bytearray=st.booleans(),
)
def test_a_known_request_decodes_as_the_generic_codec(
    data: st.DataObject, shape: tuple[int, int], client_id: str | None, tags: dict[int, bytes],
    mangle: str, where: int, junk: bytes, as_bytearray: bool,
) -> None:
    api_key, version = shape
    msg = data.draw(message_strategy(api_key, version, True))
    header = RequestHeader(api_key, version, 7, client_id)
    raw = encode_request(header, msg)
    _generic(raw)  # the connection's first request of this key and version (no fast path)
    assert (api_key, version) in codec._KNOWN
    header.unknown_tagged_fields = tags
    frame = bytearray(encode_request(header, msg))
    at = where % len(frame)
    if mangle == "cut":
        del frame[at:]
    elif mangle == "flip":
        frame[at] ^= junk[0]
    elif mangle == "junk":
        frame[at:at] = junk
    expected = _generic(frame)
    got = _decoded(frame if as_bytearray else bytes(frame))
    if isinstance(expected, ProtocolError):
        assert type(got) is type(expected)
        assert str(got) == str(expected)
    else:
        assert got == expected
    if mangle == "none":
        assert got == (RequestHeader(api_key, version, 7, client_id,
                                     tags if version >= codec.APIS[api_key].request_flexible[0] else {}), msg)
