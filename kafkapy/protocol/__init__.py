"""kafkapy.protocol: the sans-IO Kafka wire protocol (no sockets, no trio, no files, no clock).

Bytes in, typed messages out, and back: specs in `protocol_specs/` generate the dataclasses in
`messages/`; `codec` compiles construct structs per (API, version, direction) on first use;
`framing` splits a byte stream into frames. Every decoder raises only `ProtocolError`.
"""

from kafkapy.protocol.api_keys import ApiKey
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
from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
    UnsupportedVersionError,
)
from kafkapy.protocol.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from kafkapy.protocol.messages import *  # noqa: F403
from kafkapy.protocol.messages import __all__ as _messages_all

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
