"""`kafkapy cluster info|quorum|start|hot`.

- `info`: brokers (DescribeCluster, racks from Metadata), the controller, the cluster id and the
  finalized features (ApiVersions v4, or the highest the broker speaks) - any Kafka-compatible cluster.
- `quorum` (kafka-metadata-quorum.sh describe --status/--replication): the metadata quorum's
  leader, epoch, high watermark, and each voter's and observer's log end offset, lag and last
  fetch. DescribeQuorum (API 55) is answered by the quorum leader; kafkapy's broker listeners
  forward it to the active controller (a single node answers as a quorum of one), as Kafka's do,
  and `--bootstrap-controller` asks controller listeners directly (non-leaders are skipped).
- `start --nodes N` and `node kill|pause|resume|restart N`: a supervised local cluster
  (kafkapy/cli/local_cluster.py).
"""

from __future__ import annotations

import time
from typing import Any

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    Output,
    check,
    client_options,
)
from kafkapy.cli.hot import hot
from kafkapy.cli.local_cluster import node, start
from kafkapy.cli.wire import Admin, KafkaWireClient
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
)

__all__ = ["cluster"]

METADATA_TOPIC = "__cluster_metadata"


@click.group(help=f"Inspect a cluster, its metadata quorum, or start a local one. {KAFKA_COMPATIBLE}")
def cluster() -> None:
    pass


def _features(conn: KafkaWireClient) -> tuple[int, list[dict[str, Any]]]:
    version = conn.version(ApiKey.API_VERSIONS, 4)  # v4: features with a minimum level of 0 too
    r: ApiVersionsResponse = conn.send(
        ApiKey.API_VERSIONS, version,
        ApiVersionsRequest(client_software_name="kafkapy-cli", client_software_version="1"),
    )
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    names = sorted(set(supported) | {f.name for f in r.finalized_features})
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    return r.finalized_features_epoch, [
        {"feature": n, "finalized_level": finalized.get(n), "supported_min": supported.get(n, (None, None))[0],
         "supported_max": supported.get(n, (None, None))[1]}
        for n in names
    ]


@cluster.command()
@client_options
def info(settings: ClientSettings) -> int:
    """Brokers, controller, cluster id and features."""
    with Admin(settings) as admin:
        md = admin.metadata([])
        racks = {b.node_id: b.rack for b in md.brokers}
        if ApiKey.DESCRIBE_CLUSTER in admin.bootstrap.versions:
            r: DescribeClusterResponse = admin.call(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest())
            check(r.error_code, "DescribeCluster", r.error_message)
            cluster_id, controller = r.cluster_id, r.controller_id
            brokers = [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers]
        else:
            cluster_id, controller = md.cluster_id or "", md.controller_id
            brokers = [(b.node_id, b.host, b.port, b.rack) for b in md.brokers]
        epoch, features = _features(admin.bootstrap)
    broker_rows = [{"id": i, "host": h, "port": p, "rack": rack or racks.get(i)} for i, h, p, rack in sorted(brokers)]
    doc = {
        "cluster_id": cluster_id,
        "controller_id": controller,
        "brokers": broker_rows,
        "features_epoch": epoch,
        "features": features,
    }
    out = Output(settings)
    if settings.json:
        out.emit(doc)
        return 0
    out.line(f"cluster id {cluster_id}  controller {controller}  brokers {len(brokers)}")
    out.records([("id", "BROKER"), ("host", "HOST"), ("port", "PORT"), ("rack", "RACK")], broker_rows)
    if features:
        out.records([("feature", "FEATURE"), ("finalized_level", "FINALIZED"), ("supported_min", "MIN"),
                     ("supported_max", "MAX")], features)
    else:
        out.line("features: none advertised (ApiVersions lists no supported or finalized features)")
    return 0


def _describe_quorum(conn: KafkaWireClient) -> Any:
    request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name=METADATA_TOPIC, partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])
    r: DescribeQuorumResponse = conn.call(ApiKey.DESCRIBE_QUORUM, request)
    if r.error_code == ErrorCode.BROKER_NOT_AVAILABLE:
        raise CliError(f"{conn.address} is not part of a metadata quorum (a single node has none)")
    check(r.error_code, f"DescribeQuorum to {conn.address}", r.error_message)
    return r.topics[0].partitions[0]


def _quorum_rows(part: Any) -> list[dict[str, Any]]:
    now = int(time.time() * 1000)
    leader_end = max([v.log_end_offset for v in part.current_voters] or [part.high_watermark])
    rows = []
    for kind, replicas in (("Voter", part.current_voters), ("Observer", part.observers)):
        for v in replicas:
            rows.append({
                "node_id": v.replica_id, "status": "Leader" if v.replica_id == part.leader_id else kind,
                "log_end_offset": v.log_end_offset, "lag": max(leader_end - v.log_end_offset, 0),
                "last_fetch_ms_ago": None if v.last_fetch_timestamp < 0 else now - v.last_fetch_timestamp,
                "last_caught_up_ms_ago": None if v.last_caught_up_timestamp < 0 else now - v.last_caught_up_timestamp,
            })
    return rows


@cluster.command()
@click.option("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT]",
              help="ask these controller listeners (controller.quorum.voters) instead of a broker")
@client_options
def quorum(settings: ClientSettings, bootstrap_controller: str | None) -> int:
    """The metadata quorum: leader, epoch, high watermark, voters and observers with lag."""
    addresses = (bootstrap_controller or settings.bootstrap).split(",")
    tried: list[str] = []
    for address in addresses:
        try:  # a server that is down: try the next, as Admin does with --bootstrap-server
            conn = KafkaWireClient(address, properties=settings.properties, timeout_s=10)
        except CliError as e:
            tried.append(str(e))
            continue
        with conn:
            if ApiKey.DESCRIBE_QUORUM not in conn.versions:
                tried.append(f"{address} does not serve DescribeQuorum")
                continue
            part = _describe_quorum(conn)
            if part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                tried.append(f"{address} is not the quorum leader (the leader is node {part.leader_id})")
                continue
            check(part.error_code, f"DescribeQuorum to {address}", part.error_message)
        rows = _quorum_rows(part)
        doc = {"leader_id": part.leader_id, "leader_epoch": part.leader_epoch,
               "high_watermark": part.high_watermark, "max_follower_lag": max((x["lag"] for x in rows), default=0),
               "voters": [x for x in rows if x["status"] != "Observer"],
               "observers": [x for x in rows if x["status"] == "Observer"]}
        out = Output(settings)
        if settings.json:
            out.emit(doc)
            return 0
        out.line(f"LeaderId {part.leader_id}  LeaderEpoch {part.leader_epoch}  HighWatermark "
                 f"{part.high_watermark}  MaxFollowerLag {doc['max_follower_lag']}")
        out.records([("node_id", "NODE"), ("status", "STATUS"), ("log_end_offset", "LOG-END-OFFSET"),
                     ("lag", "LAG"), ("last_fetch_ms_ago", "LAST-FETCH-MS-AGO"),
                     ("last_caught_up_ms_ago", "LAST-CAUGHT-UP-MS-AGO")], rows)
        return 0
    hint = ("" if bootstrap_controller else
            " - pass --bootstrap-controller with the addresses in controller.quorum.voters")
    raise CliError("; ".join(tried) + hint)


cluster.add_command(start)
cluster.add_command(hot)
cluster.add_command(node)
