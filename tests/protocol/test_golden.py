"""Golden frames captured from real clients: our codec must read them and write them back exactly.

Why: round-trip tests of our own encoder cannot catch a field we read and write consistently
wrong. These frames were written by librdkafka (confluent-kafka, and kcat on Debian's older
librdkafka), kafka-python and aiokafka
(`tools/capture_golden.py`); each sidecar JSON holds what the capture session told the client
to send (client id, topic, acks, compression, record values), so every check compares our
decoding against an independent source. Re-encoding must reproduce the client's bytes, which
pins field order, nullability, compact/flexible encodings and tagged fields.

Fixture files: `golden/<api>_<request|response>_v<N>_<n>.hex` (one frame, hex, without the
4-byte size prefix) and a `.json` sidecar with the same stem.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkapy.protocol import (
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkapy.protocol.compression import Compression
from kafkapy.protocol.records import decode_records, iter_batches, validate_batch

GOLDEN_DIR = Path(__file__).parent / "golden"
CLIENTS = {"confluent-kafka", "kafka-python", "aiokafka", "kcat"}
CODECS = {"none", "gzip", "snappy", "lz4", "zstd"}
ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class Golden:
    stem: str
    frame: bytes
    meta: dict[str, Any]

    @property
    def api_key(self) -> int:
        return int(self.meta["api_key"])

    @property
    def api_version(self) -> int:
        return int(self.meta["api_version"])

    @property
    def expect(self) -> dict[str, Any]:
        expect: dict[str, Any] = self.meta["expect"]
        return expect


def load(direction: str) -> list[Golden]:
    out = []
    for hex_path in sorted(GOLDEN_DIR.glob(f"*_{direction}_v*_*.hex")):
        meta = json.loads(hex_path.with_suffix(".json").read_text())
        out.append(Golden(hex_path.stem, bytes.fromhex(hex_path.read_text()), meta))
    return out


REQUESTS = load("request")
RESPONSES = load("response")


def ids(goldens: list[Golden]) -> list[str]:
    return [g.stem for g in goldens]


def check_batches(
    records: bytes | memoryview | None, expect: dict[str, Any], codec: str | None
) -> int:
    """Every batch passes the CRC check, uses the expected codec and decodes to known records."""
    assert records is not None
    data = bytes(records)
    count = 0
    for pos, header in iter_batches(data):
        validate_batch(data, pos, header)
        if codec is not None:
            assert header.compression == Compression[codec.upper()]
        for record in decode_records(data, pos, header):
            assert record.value is not None
            assert record.value.decode() in expect["values"]
            assert record.key is not None
            assert record.key.decode().startswith("k")
            assert record.headers == [("h", b"v")]
            count += 1
    return count


def test_fixture_set_covers_clients_and_apis() -> None:
    """The capture kept what this file promises to check: every client, the core APIs, and a
    Produce per codec from both librdkafka versions."""
    assert {g.meta["client_label"] for g in REQUESTS} == CLIENTS
    for client in CLIENTS:
        apis = {g.api_key for g in REQUESTS if g.meta["client_label"] == client}
        for api in (
            ApiKey.API_VERSIONS,
            ApiKey.METADATA,
            ApiKey.PRODUCE,
            ApiKey.FETCH,
            ApiKey.LIST_OFFSETS,
        ):
            assert api in apis, f"{client}: no {api.name} fixture"
    for client in ("confluent-kafka", "kcat"):  # current and Debian's old librdkafka
        codecs = {
            g.expect["compression"]
            for g in REQUESTS
            if g.api_key == ApiKey.PRODUCE and g.meta["client_label"] == client
        }
        assert codecs == CODECS, f"{client}: Produce fixtures for {sorted(codecs)}"
    assert len(REQUESTS) == len(RESPONSES)
    for golden in REQUESTS + RESPONSES:
        assert len(golden.frame) < 64 * 1024, f"{golden.stem}: keep fixtures small"


@pytest.mark.parametrize("golden", REQUESTS, ids=ids(REQUESTS))
def test_request_decodes_and_reencodes(golden: Golden) -> None:
    header, msg = decode_request(golden.frame)
    assert (header.api_key, header.api_version) == (golden.api_key, golden.api_version)
    assert header.correlation_id == golden.meta["correlation_id"]
    assert header.client_id == golden.expect["client_id"]
    assert type(msg).__name__ == f"{ApiKey(golden.api_key).name.title().replace('_', '')}Request"
    assert encode_request(header, msg) == golden.frame


@pytest.mark.parametrize("golden", RESPONSES, ids=ids(RESPONSES))
def test_response_decodes_and_reencodes(golden: Golden) -> None:
    correlation_id, msg = decode_response(golden.api_key, golden.api_version, golden.frame)
    assert correlation_id == golden.meta["correlation_id"]
    assert encode_response(golden.api_key, golden.api_version, correlation_id, msg) == golden.frame


def _requests(api: ApiKey) -> list[Golden]:
    return [g for g in REQUESTS if g.api_key == api]


def _responses(api: ApiKey) -> list[Golden]:
    return [g for g in RESPONSES if g.api_key == api]


@pytest.mark.parametrize("golden", _requests(ApiKey.PRODUCE), ids=ids(_requests(ApiKey.PRODUCE)))
def test_produce_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    assert msg.acks == golden.expect["acks"]
    assert msg.timeout_ms == golden.expect["timeout_ms"]
    assert msg.transactional_id is None
    count = 0
    for topic in msg.topic_data:
        assert topic.name == golden.expect["topic"]
        for partition in topic.partition_data:
            assert partition.index == 0
            count += check_batches(partition.records, golden.expect, golden.expect["compression"])
    assert count >= 1


@pytest.mark.parametrize("golden", _requests(ApiKey.FETCH), ids=ids(_requests(ApiKey.FETCH)))
def test_fetch_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    assert msg.max_wait_ms == golden.expect["fetch_max_wait_ms"]
    assert msg.replica_id == -1 or golden.api_version >= 15
    for topic in msg.topics:
        if golden.api_version >= 13:
            assert topic.topic_id != ZERO_UUID
        else:
            assert topic.topic == golden.expect["topic"]
        assert [p.partition for p in topic.partitions] == [0]
        assert all(p.fetch_offset >= 0 for p in topic.partitions)


@pytest.mark.parametrize("golden", _responses(ApiKey.FETCH), ids=ids(_responses(ApiKey.FETCH)))
def test_fetch_response_records(golden: Golden) -> None:
    _, msg = decode_response(golden.api_key, golden.api_version, golden.frame)
    assert msg.error_code == 0
    total = 0
    for topic in msg.responses:
        for partition in topic.partitions:
            assert partition.error_code == 0
            total += check_batches(partition.records, golden.expect, None)
    assert total >= 1, "the capture keeps the largest Fetch response, which carries records"


@pytest.mark.parametrize("golden", _responses(ApiKey.PRODUCE), ids=ids(_responses(ApiKey.PRODUCE)))
def test_produce_response_values(golden: Golden) -> None:
    _, msg = decode_response(golden.api_key, golden.api_version, golden.frame)
    assert [t.name for t in msg.responses] == [golden.expect["topic"]]
    for topic in msg.responses:
        for partition in topic.partition_responses:
            assert (partition.index, partition.error_code) == (0, 0)
            assert partition.base_offset >= 0


@pytest.mark.parametrize("golden", _requests(ApiKey.METADATA), ids=ids(_requests(ApiKey.METADATA)))
def test_metadata_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    if msg.topics:
        assert {t.name for t in msg.topics} <= {golden.expect["topic"]}


@pytest.mark.parametrize(
    "golden", _responses(ApiKey.METADATA), ids=ids(_responses(ApiKey.METADATA))
)
def test_metadata_response_values(golden: Golden) -> None:
    _, msg = decode_response(golden.api_key, golden.api_version, golden.frame)
    # The broker advertised the recording proxy, which is how clients stayed on it.
    assert [(b.host, b.port) for b in msg.brokers] == [
        ("127.0.0.1", golden.meta["advertised_port"])
    ]


@pytest.mark.parametrize(
    "golden", _requests(ApiKey.CREATE_TOPICS), ids=ids(_requests(ApiKey.CREATE_TOPICS))
)
def test_create_topics_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    assert [t.name for t in msg.topics] == [golden.expect["topic"]]
    topic = msg.topics[0]
    assert topic.num_partitions == golden.expect["num_partitions"]
    assert topic.replication_factor == 1
    assert {c.name: c.value for c in topic.configs} == golden.expect["configs"]


@pytest.mark.parametrize(
    "golden", _requests(ApiKey.LIST_OFFSETS), ids=ids(_requests(ApiKey.LIST_OFFSETS))
)
def test_list_offsets_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    assert [t.name for t in msg.topics] == [golden.expect["topic"]]
    for partition in msg.topics[0].partitions:
        assert partition.partition_index == 0
        # earliest (-2), latest (-1) or the session's offsets_for_times(0) lookup
        assert partition.timestamp in (-2, -1, 0)


@pytest.mark.parametrize(
    "golden", _requests(ApiKey.DESCRIBE_CONFIGS), ids=ids(_requests(ApiKey.DESCRIBE_CONFIGS))
)
def test_describe_configs_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    assert [(r.resource_type, r.resource_name) for r in msg.resources] == [
        (2, golden.expect["topic"])
    ]


@pytest.mark.parametrize(
    "golden", _requests(ApiKey.DELETE_TOPICS), ids=ids(_requests(ApiKey.DELETE_TOPICS))
)
def test_delete_topics_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    names = [t.name for t in msg.topics] if golden.api_version >= 6 else msg.topic_names
    assert names == [golden.expect["topic"]]


@pytest.mark.parametrize(
    "golden", _requests(ApiKey.API_VERSIONS), ids=ids(_requests(ApiKey.API_VERSIONS))
)
def test_api_versions_request_values(golden: Golden) -> None:
    _, msg = decode_request(golden.frame)
    if golden.api_version >= 3:
        assert msg.client_software_name, "KIP-511 clients name themselves"
        assert msg.client_software_version
