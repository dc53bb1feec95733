"""Per-broker views with Kafka's tool flags: `log-dirs --describe` (kafka-log-dirs.sh) and
`broker-api-versions` (kafka-broker-api-versions.sh).

Both ask every broker (or those of `--broker-list`) itself, not one broker about the others:
log directories and the API versions a broker speaks are that broker's own, and after a rolling
upgrade or a failed disk they differ between brokers - which is why one runs these tools.
`log-dirs` prints Kafka's JSON document (brokers, log dirs, per partition the size, the offset
lag and whether it is a future replica); `broker-api-versions` prints each broker's ranges and
the version this client would use ("usable"), or UNSUPPORTED when the two share none.
"""

from __future__ import annotations

import json
from typing import Any

import click

from kafkapy.cli.common import KAFKA_COMPATIBLE, ClientSettings, CliError, Output, client_options
from kafkapy.cli.wire import Admin
from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)

__all__ = ["broker_api_versions", "log_dirs"]


def _brokers(admin: Admin, broker_list: str | None) -> list[int]:
    admin.metadata([])
    if not broker_list:
        return sorted(admin.brokers)
    try:
        wanted = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise click.BadParameter(f"{broker_list!r} is not a list of broker ids", param_hint="--broker-list") from None
    missing = [b for b in wanted if b not in admin.brokers]
    if missing:
        raise CliError(f"brokers {missing} are not in the cluster (it has {sorted(admin.brokers)})")
    return wanted


def _log_dirs_of(admin: Admin, node_id: int, topics: list[str] | None) -> list[dict[str, Any]]:
    request = DescribeLogDirsRequest(topics=None if topics is None else [
        DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=admin.topic_partitions(t))
        for t in topics])
    r: DescribeLogDirsResponse = admin.broker(node_id).call(ApiKey.DESCRIBE_LOG_DIRS, request)
    return [{
        "logDir": d.log_dir,
        "error": None if d.error_code == ErrorCode.NONE else ErrorCode(d.error_code).name,
        "partitions": [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                        "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                       for t in d.topics for p in t.partitions],
    } for d in r.results]


@click.command("log-dirs", help="Describe the log directories of brokers: each partition's size and "
               f"lag (kafka-log-dirs.sh). {KAFKA_COMPATIBLE}")
@click.option("--describe", is_flag=True, required=True, help="describe the log directories (Kafka's flag)")
@click.option("--broker-list", metavar="ID,ID", help="only these brokers [default: all]")
@click.option("--topic-list", metavar="TOPIC,TOPIC", help="only these topics [default: all]")
@client_options
def log_dirs(settings: ClientSettings, describe: bool, broker_list: str | None, topic_list: str | None) -> int:
    topics = None if not topic_list else [t.strip() for t in topic_list.split(",") if t.strip()]
    with Admin(settings) as admin:
        brokers = _brokers(admin, broker_list)
        doc = {"brokers": [{"broker": b, "logDirs": _log_dirs_of(admin, b, topics)} for b in brokers],
               "version": 1}
    if settings.json:
        Output(settings).emit(doc)
        return 0
    click.echo("Querying brokers for log directories information", err=True)
    click.echo(f"Received log directory information from brokers {','.join(map(str, brokers))}", err=True)
    click.echo(json.dumps(doc))
    return 0


def _api_rows(response: ApiVersionsResponse) -> list[dict[str, Any]]:
    rows = []
    for v in sorted(response.api_keys, key=lambda v: v.api_key):
        try:
            key: ApiKey | None = ApiKey(v.api_key)
        except ValueError:  # an API newer than this client's codec
            key = None
        name = "UnknownApi" if key is None else "".join(w.capitalize() for w in key.name.split("_"))
        ours = None if key is None else SUPPORTED_VERSIONS.get(key)
        low, high = v.min_version, v.max_version
        usable = None if ours is None or ours[0] > high or ours[1] < low else min(high, ours[1])
        rows.append({"api": name, "key": v.api_key, "min": low, "max": high, "usable": usable})
    return rows


def _api_line(a: dict[str, Any]) -> str:
    usable = "UNSUPPORTED" if a["usable"] is None else f"usable: {a['usable']}"
    return f"\t{a['api']}({a['key']}): {a['min']} to {a['max']} [{usable}]"


@click.command("broker-api-versions", help="The API versions every broker supports, and which this "
               f"client would use (kafka-broker-api-versions.sh). {KAFKA_COMPATIBLE}")
@client_options
def broker_api_versions(settings: ClientSettings) -> int:
    docs: list[dict[str, Any]] = []
    with Admin(settings) as admin:
        admin.metadata([])
        for node_id in sorted(admin.brokers):
            response: ApiVersionsResponse = admin.broker(node_id).send(
                ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            apis = _api_rows(response)
            docs.append({"broker": node_id, "address": admin.brokers[node_id], "apis": apis})
    if settings.json:
        Output(settings).emit(docs)
        return 0
    for d in docs:
        click.echo(f"{d['address']} (id: {d['broker']}) -> (")
        click.echo(",\n".join(_api_line(a) for a in d["apis"]) + "\n)")
    return 0
