"""kafkapy.protocol: the sans-IO Kafka wire protocol (no sockets, no trio, no files, no clock).

Bytes in, typed messages out, and back: specs in `protocol_specs/` generate the dataclasses in
`messages/`; `codec` compiles construct structs per (API, version, direction) on first use;
`framing` splits a byte stream into frames. Every decoder raises only `ProtocolError`.

The codec and the message classes are imported on first use (PEP 562 `__getattr__`): importing
any `kafkapy.protocol.*` module runs this file, and loading the codec (construct) and every
API's classes here made `import kafkapy.protocol.errors` cost ~0.3 s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    UnsupportedVersionError,
)
from kafkapy.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from kafkapy.protocol.messages import __all__ as _messages_all

if TYPE_CHECKING:
    from kafkapy.protocol.codec import (
        SUPPORTED_VERSIONS,
        RequestHeader,
        decode_request,
        decode_request_header,
        decode_response,
        encode_request,
        encode_response,
        request_header_version,
        response_header_version,
    )
    from kafkapy.protocol.messages import *  # noqa: F403

_CODEC_NAMES = frozenset({
    "SUPPORTED_VERSIONS",
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
})
_MESSAGE_NAMES = frozenset(_messages_all)

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name in _CODEC_NAMES:
            source = "kafkapy.protocol.codec"
        elif name in _MESSAGE_NAMES:
            source = "kafkapy.protocol.messages"
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "CorruptRecordError",
    "ErrorCode",
    "FrameDecoder",
    "InvalidRecordError",
    "ProtocolError",
    "RequestHeader",
    "UnsupportedVersionError",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_header_version",
    "response_header_version",
    *_messages_all,
]
