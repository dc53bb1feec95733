"""Codec plumbing: compiled codecs never fall back to the interpreter; caching; type checks."""

from __future__ import annotations

import pytest

from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkapy.protocol.codec import StructCodec, encode_body, message_codec
from kafkapy.protocol.messages import SCHEMAS, HeartbeatRequest, HeartbeatResponse
from kafkapy.protocol.schema import in_range

from .strategies import all_versions, message_def


@pytest.mark.parametrize("api_key", sorted(SCHEMAS), ids=[SCHEMAS[k].name for k in sorted(SCHEMAS)])
def test_compiled_code_never_calls_back_into_the_interpreter(api_key: int) -> None:
    # construct compiles any class lacking _emitparse/_emitbuild into a call of its interpreted
    # _parse/_build ("linkedparsers[...]"), silently losing the speed-up: none may remain.
    for request in (True, False):
        mdef = message_def(api_key, request)
        for version in (mdef.valid[0], mdef.valid[1]):
            source = StructCodec(mdef.struct, version, in_range(version, mdef.flexible)).compile().source
            assert "linkedparsers[" not in source
            assert "linkedbuilders[" not in source


def test_codecs_are_cached() -> None:
    assert message_codec(12, 4, True) is message_codec(12, 4, True)
    assert message_codec(12, 4, True) is not message_codec(12, 4, True, compiled=False)


def test_supported_versions_cover_every_api() -> None:
    assert set(SUPPORTED_VERSIONS) == set(ApiKey)
    assert SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] >= 3
    assert {(k, v) for k, v, _ in all_versions()} == {
        (k, v) for k, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)
    }


def test_wrong_message_type_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_body(12, 0, True, HeartbeatResponse())
    assert encode_body(12, 0, True, HeartbeatRequest(group_id="g", member_id="m")) == (
        b"\x00\x01g\x00\x00\x00\x00\x00\x01m"
    )
