"""Agreement with an independent implementation: kafka-python 3 encodes and decodes offline.

Users rely on byte compatibility with real clients. kafka-python builds its codecs from Kafka's
own schema files, so for every API and version both implementations know, a message we encode
must decode in kafka-python and re-encode to exactly our bytes; requests kafka-python encodes
(with headers, as it sends them) must decode here to the values it was given.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import decode_request
from kafkapy.protocol.codec import encode_body
from kafkapy.protocol.messages import SCHEMAS

from .strategies import message_def, message_strategy

kafka_protocol = pytest.importorskip("kafka.protocol", reason="kafka-python 3 not installed")
api_message = pytest.importorskip("kafka.protocol.api_message")


def _kafka_python_classes() -> dict[str, Any]:
    classes: dict[str, Any] = {}
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" in info.name:
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            continue
        for name in dir(module):
            obj = getattr(module, name)
            if (
                isinstance(obj, type)
                and issubclass(obj, api_message.ApiMessage)
                and name.endswith(("Request", "Response"))
            ):
                classes[name] = obj
    return classes


KP = _kafka_python_classes()
CASES = [
    (key, request)
    for key in sorted(SCHEMAS)
    for request in (True, False)
    if SCHEMAS[key].name + ("Request" if request else "Response") in KP
]


def _kp_class(api_key: int, request: bool) -> Any:
    return KP[SCHEMAS[api_key].name + ("Request" if request else "Response")]


@pytest.mark.parametrize(
    ("api_key", "request_"),
    CASES,
    ids=[f"{SCHEMAS[k].name}-{'req' if r else 'resp'}" for k, r in CASES],
)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_reads_and_rewrites_our_bytes(
    api_key: int, request_: bool, data: st.DataObject
) -> None:
    cls = _kp_class(api_key, request_)
    lo, hi = message_def(api_key, request_).valid
    version = data.draw(st.integers(lo, min(hi, cls.max_version)), label="version")
    msg = data.draw(message_strategy(api_key, version, request_, unknown_tags=False))
    if cls.__name__ == "ApiVersionsResponse":
        # kafka-python reads any error response in the v0 layout (what brokers send for
        # UNSUPPORTED_VERSION), so only successful responses are comparable.
        msg.error_code = 0
    ours = encode_body(api_key, version, request_, msg)
    theirs = cls.decode(ours, version=version)
    if cls.__name__ == "ApiVersionsResponse":
        # kafka-python special-cases this response when encoding; compare decoded values.
        assert theirs.error_code == msg.error_code
        assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == [
            (k.api_key, k.min_version, k.max_version) for k in msg.api_keys
        ]
        if version >= 1:
            assert theirs.throttle_time_ms == msg.throttle_time_ms
        return
    theirs._header = None
    assert bytes(theirs.encode(version=version)) == ours


def test_decode_kafka_python_metadata_request() -> None:
    from kafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]

    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
        allow_auto_topic_creation=False,
    )
    req.with_header(correlation_id=42, client_id="kp-client")
    for version in (0, 4, 9, 12):
        header, msg = decode_request(bytes(req.encode(version=version, header=True)))
        assert (header.api_key, header.api_version) == (3, version)
        assert header.correlation_id == 42
        assert header.client_id == "kp-client"
        assert [t.name for t in msg.topics] == ["orders"]
        if version >= 4:
            assert msg.allow_auto_topic_creation is False
        if version >= 10:
            assert msg.topics[0].topic_id == uuid.UUID(int=0)


def test_decode_kafka_python_produce_request() -> None:
    from kafka.protocol.producer import ProduceRequest  # type: ignore[import-untyped]

    batch = bytes(range(256)) * 4
    req = ProduceRequest(
        transactional_id="tx-1",
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="t",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=3, records=batch)
                ],
            )
        ],
    )
    req.with_header(correlation_id=7, client_id=None)
    for version in (3, 8, 9, 11):
        header, msg = decode_request(bytes(req.encode(version=version, header=True)))
        assert header.client_id is None
        assert (msg.transactional_id, msg.acks, msg.timeout_ms) == ("tx-1", -1, 1500)
        part = msg.topic_data[0].partition_data[0]
        assert (msg.topic_data[0].name, part.index) == ("t", 3)
        assert bytes(part.records) == batch


def test_decode_kafka_python_api_versions_request() -> None:
    from kafka.protocol.metadata import ApiVersionsRequest

    req = ApiVersionsRequest(client_software_name="kafka-python", client_software_version="3.0")
    req.with_header(correlation_id=1, client_id="probe")
    header, msg = decode_request(bytes(req.encode(version=3, header=True)))
    assert header.client_id == "probe"
    assert (msg.client_software_name, msg.client_software_version) == ("kafka-python", "3.0")
