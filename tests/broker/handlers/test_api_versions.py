"""ApiVersions (handlers/api_versions.py) feature flags over the wire.

What clients and Kafka's tools (kafka-features.sh, Admin.describeFeatures) rely on: v3+ lists
the features this broker supports and the cluster's finalized levels, with the finalized
features epoch = the metadata offset of the image; a v3 answer leaves out a supported feature
whose minimum level is 0 (older clients refuse it). The field names are checked against Kafka's
ApiVersionsResponse.json, so a renamed or missing tagged field fails here.
"""

from __future__ import annotations

import json
from pathlib import Path

import trio

from kafkapy.controller.records import FeatureLevelRecord, decode_record
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kafkapy.server.broker import Broker
from kafkapy.server.cluster.metadata_log import MetadataLog
from tests.kafka_reference import kafka_reference
from tests.server.cluster.test_migration import legacy_data_dir
from tests.server.helpers import Client, running_broker


async def finalized(client: Client, version: int) -> ApiVersionsResponse:
    """The answer once the active controller has committed the bootstrap levels."""
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    with trio.fail_after(30):
        while True:
            resp: ApiVersionsResponse = await client.request(ApiKey.API_VERSIONS, version, request)
            assert resp.error_code == ErrorCode.NONE
            if resp.finalized_features:
                return resp
            await trio.sleep(0.05)


def levels(resp: ApiVersionsResponse) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features}


def supported(resp: ApiVersionsResponse) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_version, f.max_version) for f in resp.supported_features}


async def test_v3_and_v4_list_finalized_and_supported_features(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        client = await Client.connect(port)
        v4 = await finalized(client, 4)
        assert levels(v4) == {"metadata.version": (25, 25), "group.version": (1, 1)}
        assert supported(v4) == {"metadata.version": (25, 25), "group.version": (0, 1)}
        v3 = await finalized(client, 3)
        assert levels(v3) == levels(v4)
        # group.version's minimum is 0: left out below v4, as Kafka does
        assert supported(v3) == {"metadata.version": (25, 25)}
        # not implemented, so never finalized (a Java producer would switch to KIP-890 part 2)
        assert "transaction.version" not in levels(v4) | supported(v4)
        image = broker.cluster.image
        assert 0 <= v4.finalized_features_epoch <= image.offset
        assert image.features == {"metadata.version": 25, "group.version": 1}
        # v0-v2 have no feature fields at all
        old = await client.request(ApiKey.API_VERSIONS, 2, ApiVersionsRequest())
        assert old.supported_features == []
        assert old.finalized_features == []
        await client.aclose()


async def test_the_epoch_is_the_image_offset_and_survives_a_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        first = await finalized(client, 3)
        await client.aclose()
    async with running_broker(tmp_path) as (broker, _, port):
        client = await Client.connect(port)
        again = await finalized(client, 3)
        assert levels(again) == levels(first)
        assert again.finalized_features_epoch >= first.finalized_features_epoch
        # written once: the restart replays the levels, it does not write them again
        records = _feature_records(broker)
        assert [name for name, _ in records] == ["metadata.version", "group.version"]
        await client.aclose()


def _feature_records(broker: Broker) -> list[tuple[str, int]]:
    """The FeatureLevelRecords in the metadata log on disk."""
    out: list[tuple[str, int]] = []
    log = MetadataLog.open(broker.logs)
    for entry in log.read(log.start_offset(), log.end_offset() + 1):
        if entry.data:
            record = decode_record(entry.data)
            if isinstance(record, FeatureLevelRecord):
                out.append((record.name, record.feature_level))
    return out


async def test_a_data_dir_from_before_feature_levels_gets_them_and_keeps_its_topics(
    tmp_path: Path,
) -> None:
    data = legacy_data_dir(tmp_path)
    async with running_broker(data) as (broker, _, port):
        client = await Client.connect(port)
        resp = await finalized(client, 3)
        assert levels(resp)["metadata.version"] == (25, 25)
        assert broker.cluster.image.topics  # the migrated topics are still there
        await client.aclose()


def test_field_names_match_kafkas_definition() -> None:
    spec_file = kafka_reference("message", "ApiVersionsResponse.json")
    text = "\n".join(line for line in spec_file.read_text().splitlines() if not line.strip().startswith("//"))
    spec = {f["name"]: f for f in json.loads(text)["fields"]}
    assert {k: spec[k]["tag"] for k in ("SupportedFeatures", "FinalizedFeaturesEpoch", "FinalizedFeatures")} == {
        "SupportedFeatures": 0, "FinalizedFeaturesEpoch": 1, "FinalizedFeatures": 2}
    assert [f["name"] for f in spec["SupportedFeatures"]["fields"]] == ["Name", "MinVersion", "MaxVersion"]
    assert [f["name"] for f in spec["FinalizedFeatures"]["fields"]] == [
        "Name", "MaxVersionLevel", "MinVersionLevel"]
    assert "MinSupportedVersion = 0 are omitted" in spec["SupportedFeatures"]["about"]
    fields = ApiVersionsResponse.SupportedFeatureKey.__dataclass_fields__
    assert {"name", "min_version", "max_version"} <= set(fields)
    fields = ApiVersionsResponse.FinalizedFeatureKey.__dataclass_fields__
    assert {"name", "max_version_level", "min_version_level"} <= set(fields)
