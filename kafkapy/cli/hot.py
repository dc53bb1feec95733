"""`kafkapy cluster hot`: measure per-partition rates cluster-wide, list the hot partitions and
brokers, and propose - with `--execute`, run - leadership moves that even out broker load.

How the rates are gathered (the command collects them; brokers report nothing new): two samples
`--interval` seconds apart of every partition's size on its leader (DescribeLogDirs, asked of
every broker) and log end offset (ListOffsets, asked of each leader); the differences over the
elapsed time are the byte and message rates. Retention deleting a segment between the samples
reads as 0 for that partition. Internal topics are left out. The rules (hot partition, hot
broker, balancer) are `leader_load.py`'s.

Executing a plan: each moved partition gets its replicas reordered with the new leader first
(AlterPartitionReassignments over the same replicas: no data is copied), then a preferred
election (ElectLeaders). The reorder is permanent, so the controller's leader balance keeps the
new leader.
"""

from __future__ import annotations

import time
from typing import Any

import click

from kafkapy.cli.common import ClientSettings, CliError, Output, check, client_options
from kafkapy.cli.leader_load import (
    LeaderMove,
    PartitionLoad,
    balance_leaders,
    broker_loads,
    hot_brokers,
    hot_partitions,
    max_over_mean,
)
from kafkapy.cli.offsets import list_offsets
from kafkapy.cli.partitions import TIMEOUT_MS, alter_reassignments
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
)

__all__ = ["hot"]

TP = tuple[str, int]
PREFERRED = 0


def _layout(admin: Admin) -> dict[TP, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """(leader, replicas, isr) of every partition of every non-internal topic."""
    out = {}
    for t in admin.metadata(None).topics:
        if t.is_internal or t.error_code != ErrorCode.NONE:
            continue
        for p in t.partitions:
            out[(str(t.name), p.partition_index)] = (p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes))
    return out


def _sample(admin: Admin, layout: dict[TP, tuple[int, tuple[int, ...], tuple[int, ...]]]) -> tuple[float, dict[TP, int], dict[TP, int]]:
    """(time, size on the leader, log end offset) of every partition."""
    sizes: dict[TP, int] = {}
    for broker in sorted(admin.brokers):
        r: DescribeLogDirsResponse = admin.broker(broker).call(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None))
        for d in r.results:
            for t in d.topics:
                for p in t.partitions:
                    tp = (str(t.name), p.partition_index)
                    if tp in layout and layout[tp][0] == broker and not p.is_future_key:
                        sizes[tp] = sizes.get(tp, 0) + p.partition_size
    ends = list_offsets(admin, [tp for tp, v in layout.items() if v[0] >= 0], skip_unreachable=True)
    return time.monotonic(), sizes, ends


def measure(admin: Admin, interval_s: float) -> list[PartitionLoad]:
    """Every partition's byte and message rate over `interval_s` (see the module doc)."""
    layout = _layout(admin)
    t0, sizes0, ends0 = _sample(admin, layout)
    time.sleep(interval_s)
    t1, sizes1, ends1 = _sample(admin, layout)
    dt = max(t1 - t0, 1e-3)
    return [
        PartitionLoad(t, p, leader, isr, replicas,
                      max(0, sizes1.get((t, p), 0) - sizes0.get((t, p), 0)) / dt,
                      max(0, ends1.get((t, p), 0) - ends0.get((t, p), 0)) / dt)
        for (t, p), (leader, replicas, isr) in sorted(layout.items())
    ]


def run_moves(admin: Admin, moves: list[LeaderMove]) -> list[str]:
    """Reorder the moved partitions' replicas, then elect their preferred leaders; the
    partitions whose election failed (as `topic-partition: ERROR`)."""
    alter_reassignments(admin, {(m.topic, m.partition): list(m.replicas) for m in moves}, "reordering replicas")
    by_topic: dict[str, list[int]] = {}
    for m in moves:
        by_topic.setdefault(m.topic, []).append(m.partition)
    request = ElectLeadersRequest(election_type=PREFERRED, timeout_ms=TIMEOUT_MS, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()])
    response: ElectLeadersResponse = admin.call(ApiKey.ELECT_LEADERS, request)
    check(response.error_code, "preferred leader election")
    return [f"{r.topic}-{p.partition_id}: {ErrorCode(p.error_code).name}"
            for r in response.replica_election_results for p in r.partition_result
            if p.error_code not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]


def _report(out: Output, doc: dict[str, Any]) -> None:
    out.line(f"measured over {doc['interval_s']:.1f} s; broker load = bytes/s of the partitions it leads")
    out.records([("topic", "TOPIC"), ("partition", "PARTITION"), ("leader", "LEADER"),
                 ("bytes_per_s", "BYTES/S"), ("messages_per_s", "MESSAGES/S")], doc["hot_partitions"])
    out.records([("broker", "BROKER"), ("load", "BYTES/S"), ("hot", "HOT")], doc["brokers"])
    for m in doc["moves"]:
        out.line(f"move leader of {m['topic']}-{m['partition']}: {m['from']} -> {m['to']}")
    out.line(f"max/mean broker load: before {doc['before']:.2f}, after {doc['after']:.2f}"
             f"{' (executed)' if doc['executed'] else '' if not doc['moves'] else ' (dry run: --execute runs it)'}")


@click.command("hot", help="Measure per-partition byte and message rates on every broker, list hot "
               "partitions and brokers, and propose leadership moves that even out broker load "
               "(dry run unless --execute).")
@click.option("--interval", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="seconds between the two samples the rates come from")
@click.option("--partition-factor", type=click.FloatRange(min=1.0), default=3.0, show_default=True,
              help="hot partition: above this times its topic's median rate")
@click.option("--broker-factor", type=click.FloatRange(min=1.0), default=1.25, show_default=True,
              help="hot broker: above this times the mean broker load")
@click.option("--execute", is_flag=True, help="run the proposed leadership moves")
@client_options
def hot(settings: ClientSettings, interval: float, partition_factor: float, broker_factor: float,
        execute: bool) -> int:
    with Admin(settings) as admin:
        parts = measure(admin, interval)
        brokers = sorted(admin.brokers)
        loads = broker_loads(parts, brokers)
        moves = balance_leaders(parts, brokers)
        planned = broker_loads(parts, brokers, {(m.topic, m.partition): m.to_leader for m in moves})
        failed = run_moves(admin, moves) if execute and moves else []
    hot_list = [{"topic": p.topic, "partition": p.partition, "leader": p.leader,
                 "bytes_per_s": round(p.bytes_per_s, 1), "messages_per_s": round(p.messages_per_s, 1)}
                for p in hot_partitions(parts, partition_factor)]
    hot_set = set(hot_brokers(loads, broker_factor))
    doc = {
        "interval_s": interval, "hot_partitions": hot_list,
        "brokers": [{"broker": b, "load": round(loads[b], 1), "hot": b in hot_set} for b in brokers],
        "moves": [{"topic": m.topic, "partition": m.partition, "from": m.from_leader, "to": m.to_leader,
                   "replicas": list(m.replicas)} for m in moves],
        "before": max_over_mean(loads), "after": max_over_mean(planned), "executed": execute and bool(moves),
        "failed": failed,
    }
    out = Output(settings)
    if settings.json:
        out.emit(doc)
    else:
        _report(out, doc)
    if failed:
        raise CliError("leader elections failed: " + ", ".join(failed))
    return 0
