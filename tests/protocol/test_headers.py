"""Request headers v1/v2 and response headers v0/v1, as clients put them on the wire."""

from __future__ import annotations

import struct

import pytest

from kafkapy.protocol import (
    ApiKey,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    HeartbeatRequest,
    MetadataResponse,
)


def test_header_v1_layout() -> None:
    frame = encode_request(RequestHeader(12, 3, 99, "abc"), HeartbeatRequest(group_id="g"))
    assert frame[:13] == struct.pack(">hhih", 12, 3, 99, 3) + b"abc"
    assert request_header_version(12, 3) == 1
    assert decode_request_header(frame) == RequestHeader(12, 3, 99, "abc")


def test_header_v2_keeps_client_id_non_compact_and_reads_tags() -> None:
    assert request_header_version(12, 4) == 2
    # group "g", generation 0, member "m", null instance id, no tags
    body = b"\x02g" + b"\x00\x00\x00\x00" + b"\x02m" + b"\x00" + b"\x00"
    frame = struct.pack(">hhih", 12, 4, 5, 2) + b"id" + b"\x01\x03\x02zz" + body
    header, msg = decode_request(frame)
    assert header == RequestHeader(12, 4, 5, "id", {3: b"zz"})
    assert msg.group_id == "g"
    assert msg.member_id == "m"
    # unknown header tags survive re-encoding
    assert encode_request(header, msg) == frame


def test_null_client_id() -> None:
    frame = encode_request(RequestHeader(18, 0, 1, None), ApiVersionsRequest())
    assert frame == struct.pack(">hhih", 18, 0, 1, -1)
    assert decode_request_header(frame).client_id is None


def test_newer_api_versions_probe_header_is_readable() -> None:
    # librdkafka probes with the newest ApiVersions it knows; we must read the header anyway.
    frame = struct.pack(">hhih", 18, 127, 8, 3) + b"rdk" + b"\x00" + b"\x05junk"
    header = decode_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 127, 8)
    assert header.client_id == "rdk"


def test_truncated_header() -> None:
    full = struct.pack(">hhih", 3, 1, 1, 1) + b"c"
    for cut in range(len(full)):
        with pytest.raises(ProtocolError):
            decode_request_header(full[:cut])


def test_response_header_versions() -> None:
    assert response_header_version(ApiKey.API_VERSIONS, 3) == 0  # always v0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    assert response_header_version(ApiKey.METADATA, 8) == 0
    v0 = encode_response(3, 8, 77, MetadataResponse())
    v1 = encode_response(3, 9, 77, MetadataResponse())
    assert v0[:4] == v1[:4] == struct.pack(">i", 77)
    assert v1[4] == 0  # empty tagged section of header v1
    assert decode_response(3, 8, v0) == (77, MetadataResponse())
    assert decode_response(3, 9, v1) == (77, MetadataResponse())


def test_api_versions_v3_response_has_no_default_tagged_fields() -> None:
    # librdkafka < 2.2 (Debian's kcat) cannot parse default-valued tagged fields here.
    resp = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    wire = encode_response(18, 3, 1, resp)
    assert wire == (
        struct.pack(">ih", 1, 0)  # header v0, error_code
        + b"\x02" + struct.pack(">hhh", 18, 0, 4) + b"\x00"  # one api key, no tags
        + struct.pack(">i", 0)  # throttle_time_ms
        + b"\x00"  # no tagged fields at all
    )
    resp.finalized_features_epoch = 5
    assert encode_response(18, 3, 1, resp).endswith(b"\x01\x01\x08" + struct.pack(">q", 5))


def test_header_v0_has_no_client_id() -> None:
    # ControlledShutdown v0, the only request with header v0: the body starts after 8 bytes.
    assert request_header_version(7, 0) == 0
    frame = struct.pack(">hhii", 7, 0, 3, 1001)
    assert decode_request_header(frame) == RequestHeader(7, 0, 3, None)
