"""Our specs equal Kafka's reference definitions, field by field.

Users rely on byte-exact compatibility with real clients; a single wrong version range or
nullability breaks them. The reference JSON is read only here (never by the package), and the
test skips with a clear reason when the reference folder is absent, and fails under CI
(tests/kafka_reference.py): it is the guard of `protocol_specs/` against drifting from Kafka.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey
from kafkapy.protocol.spec import FieldSpec, MessageSpec, parse_range, snake_case

from .specs import load_api_specs, load_header_specs, reference_dir


@pytest.fixture(autouse=True)
def _kafka_definitions() -> None:
    """Every test here reads Kafka's definitions: fail under CI, skip elsewhere, without them."""
    reference_dir()

#: The APIs the issue requires, by schema name.
REQUIRED = ["Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls", "CreateAcls", "DeleteAcls", "DescribeConfigs", "AlterConfigs", "DescribeLogDirs", "SaslAuthenticate", "CreatePartitions", "DeleteGroups", "ElectLeaders", "IncrementalAlterConfigs", "AlterPartitionReassignments", "AlterReplicaLogDirs", "ListPartitionReassignments", "OffsetDelete", "DescribeUserScramCredentials", "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum", "AlterPartition", "FetchSnapshot", "DescribeCluster", "DescribeProducers", "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "DescribeTransactions", "ListTransactions", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe", "DescribeTopicPartitions", "AllocateProducerIds", "DescribeClientQuotas", "AlterClientQuotas"]


def _reference(name: str) -> dict[str, Any]:
    text = (reference_dir() / f"{name}.json").read_text()
    data: dict[str, Any] = json.loads(
        "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    )
    return data


def _opt_range(text: str | None) -> object:
    return None if text is None else parse_range(text)


def _norm_default(value: object) -> str | None:
    if value is None:
        return None
    text = str(value)
    return text.lower() if text.lower() in ("true", "false") else text


def _compare_fields(where: str, ours: tuple[FieldSpec, ...], ref: list[dict[str, Any]]) -> None:
    assert [f.name for f in ours] == [f["name"] for f in ref], where
    for mine, theirs in zip(ours, ref, strict=True):
        at = f"{where}.{mine.name}"
        assert mine.type == theirs["type"], at
        assert mine.versions == parse_range(theirs["versions"]), at
        assert mine.nullable == _opt_range(theirs.get("nullableVersions")), at
        tag = theirs.get("tag")
        assert mine.tag == (None if tag is None else int(tag)), at
        assert mine.tagged == _opt_range(theirs.get("taggedVersions")), at
        assert mine.flexible_override == ("flexibleVersions" in theirs), at
        if mine.flexible_override:
            assert mine.flexible == parse_range(theirs["flexibleVersions"]), at
        assert mine.default == _norm_default(theirs.get("default")), at
        _compare_fields(at, mine.fields, theirs.get("fields", []))


def _compare_message(ours: MessageSpec, ref: dict[str, Any]) -> None:
    assert ours.name == ref["name"]
    assert ours.valid == parse_range(ref["validVersions"]), ours.name
    assert ours.flexible == parse_range(ref["flexibleVersions"]), ours.name
    _compare_fields(ours.name, ours.fields, ref["fields"])
    common = ref.get("commonStructs", [])
    assert [s.name for s in ours.structs] == [s["name"] for s in common], ours.name
    for mine, theirs in zip(ours.structs, common, strict=True):
        assert mine.versions == parse_range(theirs["versions"])
        _compare_fields(f"{ours.name}.{mine.name}", mine.fields, theirs["fields"])


SPECS = {api.name: api for api in load_api_specs()}


def test_every_required_api_has_a_spec() -> None:
    assert sorted(SPECS) == sorted(REQUIRED)
    assert {k.name for k in ApiKey} == {snake_case(n).upper() for n in REQUIRED}


@pytest.mark.parametrize("name", REQUIRED)
def test_api_matches_reference(name: str) -> None:
    api = SPECS[name]
    request, response = _reference(f"{name}Request"), _reference(f"{name}Response")
    assert api.key == request["apiKey"] == response["apiKey"]
    _compare_message(api.request, request)
    _compare_message(api.response, response)
    # Full declared range, no gaps: clients that pin versions fail on gaps.
    valid = parse_range(request["validVersions"])
    assert valid is not None
    assert SUPPORTED_VERSIONS[ApiKey(api.key)] == (valid.lo, valid.hi)


def test_headers_match_reference() -> None:
    headers = load_header_specs()
    for name in ("RequestHeader", "ResponseHeader"):
        _compare_message(headers[name], _reference(name))


def test_reference_path_is_not_read_by_the_package() -> None:
    root = Path(__file__).resolve().parents[2] / "kafkapy"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "/work/shared" not in text, path
        assert "kafka-protocol" not in text, path
