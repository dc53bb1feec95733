"""One-time importer: Kafka's JSON message definitions -> the project's own `.spec` files.

Why it exists: the wire facts (names, types, version ranges, tags, defaults) must match Kafka
exactly, and transcribing ~110 messages by hand invites drift. This script was run once at
development time; its output in `protocol_specs/` is owned by the project from then on and is
what everything else builds from. It keeps the wire facts only: no prose, comments, entity
types, map keys or licence text survive the conversion.

Usage: python tools/import_kafka_specs.py /path/to/kafka/message protocol_specs/
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

#: The APIs the broker speaks, by their schema name (file stem without Request/Response).
APIS: tuple[str, ...] = (
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
    "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
    "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics", "DeleteTopics",
    "DeleteRecords", "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn",
    "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers", "TxnOffsetCommit", "DescribeAcls",
    "CreateAcls", "DeleteAcls", "DescribeConfigs", "AlterConfigs", "DescribeLogDirs",
    "SaslAuthenticate", "CreatePartitions", "DeleteGroups", "ElectLeaders",
    "IncrementalAlterConfigs", "OffsetDelete", "DescribeUserScramCredentials", "AlterReplicaLogDirs",
    "AlterUserScramCredentials", "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "DescribeQuorum",
    "AlterPartition", "FetchSnapshot", "DescribeCluster", "DescribeProducers",
    "BrokerRegistration", "BrokerHeartbeat", "UnregisterBroker", "DescribeTransactions",
    "ListTransactions", "ConsumerGroupHeartbeat", "ConsumerGroupDescribe",
    "DescribeTopicPartitions", "AllocateProducerIds", "DescribeClientQuotas", "AlterClientQuotas",
)


def _load(path: Path) -> dict[str, Any]:
    text = "\n".join(
        line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
    )
    data: dict[str, Any] = json.loads(text)
    return data


def _field_line(f: dict[str, Any]) -> str:
    parts = [f["name"], f["type"], "v" + f["versions"]]
    if "nullableVersions" in f:
        parts.append("null=" + f["nullableVersions"])
    if "tag" in f:
        parts.append(f"tag={f['tag']}")
    if "taggedVersions" in f:
        parts.append("tagged=" + f["taggedVersions"])
    if "flexibleVersions" in f:
        parts.append("flexible=" + f["flexibleVersions"])
    if "default" in f:
        default = str(f["default"])
        if default.lower() in ("true", "false"):
            default = default.lower()
        parts.append("default=" + json.dumps(default))
    return " ".join(parts)


def _fields(fields: list[dict[str, Any]], indent: int, out: list[str]) -> None:
    for f in fields:
        out.append(" " * indent + _field_line(f))
        if "fields" in f:
            _fields(f["fields"], indent + 2, out)


def _section(kind: str, data: dict[str, Any], out: list[str]) -> None:
    out.append(f"{kind} versions={data['validVersions']} flexible={data['flexibleVersions']}")
    _fields(data["fields"], 2, out)
    for struct in data.get("commonStructs", []):
        out.append(f"  struct {struct['name']} v{struct['versions']}")
        _fields(struct["fields"], 4, out)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def convert(src: Path, name: str) -> str:
    req = _load(src / f"{name}Request.json")
    resp = _load(src / f"{name}Response.json")
    out = [f"api {req['apiKey']} {name}"]
    _section("request", req, out)
    _section("response", resp, out)
    return "\n".join(out) + "\n"


def convert_headers(src: Path) -> str:
    out: list[str] = []
    for kind in ("RequestHeader", "ResponseHeader"):
        data = _load(src / f"{kind}.json")
        out.append(f"header {kind} versions={data['validVersions']} flexible={data['flexibleVersions']}")
        _fields(data["fields"], 2, out)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    src, dst = Path(argv[1]), Path(argv[2])
    dst.mkdir(parents=True, exist_ok=True)
    for name in APIS:
        (dst / f"{snake(name)}.spec").write_text(convert(src, name))
    (dst / "headers.spec").write_text(convert_headers(src))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
