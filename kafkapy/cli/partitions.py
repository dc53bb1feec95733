"""Partition-level admin tools with Kafka's flags: `delete-records` (kafka-delete-records.sh),
`leader-election` (kafka-leader-election.sh) and `reassign-partitions`
(kafka-reassign-partitions.sh).

Each takes the JSON file Kafka's tool takes, so a file written for one works with the other:
- delete-records `--offset-json-file`: {"partitions": [{"topic": T, "partition": P, "offset": N}],
  "version": 1}; offset -1 is the high watermark. DeleteRecords goes to each partition's leader.
- leader-election `--path-to-json-file`: {"partitions": [{"topic": T, "partition": P}]}, or
  `--topic`/`--partition`, or `--all-topic-partitions`. ElectLeaders goes to any broker, which
  forwards it to the controller.
- reassign-partitions `--reassignment-json-file`: {"version": 1, "partitions": [{"topic": T,
  "partition": P, "replicas": [..]}]}. `--execute` prints the current assignment (the rollback
  file) and starts the moves, `--verify` reports each partition as completed or in progress,
  `--cancel` reverts the moves in flight, `--generate` proposes a placement of
  `--topics-to-move-json-file`'s topics over `--broker-list` with the controller's rack-aware
  striped placement (`--disable-rack-aware`: without racks).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
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
from kafkapy.cli.wire import Admin
from kafkapy.controller.placement import propose_reassignment
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

__all__ = ["alter_reassignments", "delete_records", "leader_election", "read_partitions_file", "reassign_partitions"]

TIMEOUT_MS = 30_000
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
JSON_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


_FIELD_TYPES: dict[str, Any] = {"topic": str, "partition": int, "offset": int, "replicas": list}


def _valid(entry: Any, keys: tuple[str, ...]) -> bool:
    if not isinstance(entry, dict):
        return False
    for key in keys:
        value = entry.get(key)
        if not isinstance(value, _FIELD_TYPES[key]) or isinstance(value, bool):
            return False
    replicas = entry.get("replicas", [])
    return isinstance(replicas, list) and all(isinstance(r, int) and not isinstance(r, bool) for r in replicas)


def read_partitions_file(path: Path, *keys: str) -> list[dict[str, Any]]:
    """The "partitions" list of one of Kafka's JSON files, each entry checked for `keys` (and
    their types): anything else is a usage error naming the expected shape."""
    fields = ("topic", "partition", *keys)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"{path}: {e}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(_valid(e, fields) for e in entries):
        shape = ", ".join(json.dumps(k) for k in fields)
        raise click.BadParameter(f'{path}: expected {{"partitions": [{{{shape}}}, ...]}}')
    return entries


def _name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


# -- delete-records ---------------------------------------------------------------------------------
@click.command("delete-records", help="Delete the records of partitions below an offset "
               f"(kafka-delete-records.sh). {KAFKA_COMPATIBLE}")
@click.option("--offset-json-file", type=JSON_FILE, required=True,
              help='{"partitions": [{"topic": T, "partition": P, "offset": N}], "version": 1} (-1: the end)')
@client_options
def delete_records(settings: ClientSettings, offset_json_file: Path) -> int:
    wanted = {(str(e["topic"]), int(e["partition"])): int(e["offset"])
              for e in read_partitions_file(offset_json_file, "offset")}
    rows: list[dict[str, Any]] = []
    with Admin(settings) as admin:
        for leader, tps in sorted(admin.by_leader(wanted).items()):
            if leader < 0:
                raise CliError(f"{', '.join(_name(*tp) for tp in tps)}", ErrorCode.LEADER_NOT_AVAILABLE)
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            request = DeleteRecordsRequest(timeout_ms=TIMEOUT_MS, topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(name=t, partitions=[
                    DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=wanted[(t, p)])
                    for p in ps]) for t, ps in by_topic.items()])
            response: DeleteRecordsResponse = admin.broker(leader).call(ApiKey.DELETE_RECORDS, request)
            for t in response.topics:
                for p in t.partitions:
                    check(p.error_code, f"deleting the records of {_name(t.name, p.partition_index)}")
                    rows.append({"topic": t.name, "partition": p.partition_index, "low_watermark": p.low_watermark})
    out = Output(settings)
    if settings.json:
        out.emit(rows)
        return 0
    out.line("Records delete operation completed:")
    for r in sorted(rows, key=lambda r: (r["topic"], r["partition"])):
        out.line(f"partition: {_name(r['topic'], r['partition'])}\tlow_watermark: {r['low_watermark']}")
    return 0


# -- leader-election --------------------------------------------------------------------------------
def _election_targets(path: Path | None, topic: str | None, partition: int | None,
                      all_partitions: bool) -> list[tuple[str, int]] | None:
    chosen = sum([path is not None, topic is not None, all_partitions])
    if chosen != 1:
        raise click.UsageError("name the partitions with one of --topic/--partition, "
                               "--path-to-json-file or --all-topic-partitions")
    if topic is not None and partition is None:
        raise click.UsageError("--topic needs --partition")
    if path is not None:
        return [(str(e["topic"]), int(e["partition"])) for e in read_partitions_file(path)]
    return None if all_partitions else [(str(topic), int(partition or 0))]


@click.command("leader-election", help="Elect partition leaders: the preferred replica or, losing "
               f"data, any live one (kafka-leader-election.sh). {KAFKA_COMPATIBLE}")
@click.option("--election-type", type=click.Choice(list(ELECTION_TYPES), case_sensitive=False), required=True)
@click.option("--topic", help="the topic of --partition")
@click.option("--partition", type=click.IntRange(min=0), help="the partition (with --topic)")
@click.option("--all-topic-partitions", is_flag=True, help="every partition of every topic")
@click.option("--path-to-json-file", type=JSON_FILE, help='{"partitions": [{"topic": T, "partition": P}]}')
@client_options
def leader_election(settings: ClientSettings, election_type: str, topic: str | None, partition: int | None,
                    all_topic_partitions: bool, path_to_json_file: Path | None) -> int:
    kind = election_type.upper()
    targets = _election_targets(path_to_json_file, topic, partition, all_topic_partitions)
    by_topic: dict[str, list[int]] = {}
    for t, p in targets or []:
        by_topic.setdefault(t, []).append(p)
    request = ElectLeadersRequest(election_type=ELECTION_TYPES[kind], timeout_ms=TIMEOUT_MS, topic_partitions=None
                                  if targets is None else [ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
                                                           for t, ps in by_topic.items()])
    with Admin(settings) as admin:
        response: ElectLeadersResponse = admin.call(ApiKey.ELECT_LEADERS, request)
    check(response.error_code, f"{kind} leader election")
    rows = [{"topic": r.topic, "partition": p.partition_id, "error": ErrorCode(p.error_code).name,
             "message": p.error_message}
            for r in response.replica_election_results for p in r.partition_result]
    return _election_report(settings, kind, rows)


def _election_report(settings: ClientSettings, kind: str, rows: list[dict[str, Any]]) -> int:
    out = Output(settings)
    failed = [r for r in rows if r["error"] not in ("NONE", "ELECTION_NOT_NEEDED")]
    if settings.json:
        out.emit(rows)
        return 1 if failed else 0
    names = {code: ", ".join(_name(r["topic"], r["partition"]) for r in rows if r["error"] == code)
             for code in ("NONE", "ELECTION_NOT_NEEDED")}
    if names["NONE"]:
        out.line(f"Successfully completed leader election ({kind}) for partitions {names['NONE']}")
    if names["ELECTION_NOT_NEEDED"]:
        out.line(f"Valid replica already elected for partitions {names['ELECTION_NOT_NEEDED']}")
    if not rows:
        out.line(f"No partition needed a {kind.lower()} leader election")
    for r in failed:
        detail = f" ({r['message']})" if r["message"] else ""
        click.echo(f"kafkapy: election of {_name(r['topic'], r['partition'])} failed: {r['error']}{detail}",
                   err=True)
    return 1 if failed else 0


# -- reassign-partitions ----------------------------------------------------------------------------
def _current(admin: Admin, topics: Iterable[str]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = {}
    for t in admin.metadata(list(dict.fromkeys(topics))).topics:
        check(t.error_code, f"topic {t.name}")
        for p in t.partitions:
            out[(str(t.name), p.partition_index)] = list(p.replica_nodes)
    return out


def alter_reassignments(admin: Admin, moves: dict[tuple[str, int], list[int] | None], what: str) -> None:
    by_topic: dict[str, list[int]] = {}
    for t, p in moves:
        by_topic.setdefault(t, []).append(p)
    request = AlterPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=[
        AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=[
            AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=p, replicas=moves[(t, p)])
            for p in ps]) for t, ps in by_topic.items()])
    response: AlterPartitionReassignmentsResponse = admin.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, request)
    check(response.error_code, what, response.error_message)
    for result in response.responses:
        for part in result.partitions:
            check(part.error_code, f"{what} of {_name(result.name, part.partition_index)}", part.error_message)


def _ongoing(admin: Admin) -> dict[tuple[str, int], Any]:
    response: ListPartitionReassignmentsResponse = admin.call(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(timeout_ms=TIMEOUT_MS, topics=None))
    check(response.error_code, "listing partition reassignments", response.error_message)
    return {(str(t.name), p.partition_index): p for t in response.topics for p in t.partitions}


def _assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]})


def propose(
    current: dict[tuple[str, int], list[int]], brokers: dict[int, str | None], *, rack_aware: bool = True
) -> dict[tuple[str, int], list[int]]:
    """`--generate`'s plan: every partition of the topics in `current` placed over `brokers`
    (id -> rack) with the controller's striped, rack-aware placement (replicas of a partition
    on distinct racks, leaders spread over the brokers), each topic keeping its replication
    factor capped at the brokers named. Mixed racked and rackless brokers are a usage error
    unless `rack_aware` is off (Kafka's rule: `--disable-rack-aware`)."""
    if rack_aware and len({rack is None for rack in brokers.values()}) > 1:
        rackless = sorted(b for b, rack in brokers.items() if rack is None)
        raise click.UsageError(
            f"Not all brokers have rack information (none for {rackless}); "
            "add --disable-rack-aware to place replicas without racks"
        )
    by_topic: dict[str, dict[int, list[int]]] = {}
    for (t, p), replicas in current.items():
        by_topic.setdefault(t, {})[p] = replicas[: len(brokers)]
    try:
        placed = propose_reassignment(by_topic, brokers, rack_aware=rack_aware)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    return {(t, p): list(replicas) for t, ps in placed.items() for p, replicas in ps.items()}


def _generate(admin: Admin, topics_file: Path, broker_list: str | None, rack_aware: bool) -> None:
    try:
        topics = [str(t["topic"]) for t in json.loads(topics_file.read_text())["topics"]]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise click.BadParameter(f'{topics_file}: expected {{"topics": [{{"topic": T}}, ...]}} ({e!r})') from None
    if not broker_list:
        raise click.UsageError("--generate needs --broker-list")
    try:
        brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise click.BadParameter(f"{broker_list!r} is not a list of broker ids", param_hint="--broker-list") from None
    if not brokers:
        raise click.BadParameter("name at least one broker", param_hint="--broker-list")
    current = _current(admin, topics)
    known = {b.node_id: b.rack for b in admin.metadata([]).brokers}
    proposed = propose(current, {b: known.get(b) for b in brokers}, rack_aware=rack_aware)
    click.echo(f"Current partition replica assignment\n{_assignment_json(current)}\n")
    click.echo(f"Proposed partition reassignment configuration\n{_assignment_json(proposed)}")


def _verify(settings: ClientSettings, admin: Admin, wanted: dict[tuple[str, int], list[int]]) -> int:
    ongoing = _ongoing(admin)
    current = _current(admin, (t for t, _ in wanted))
    rows: list[dict[str, Any]] = []
    for tp, replicas in sorted(wanted.items()):
        state = ("in_progress" if tp in ongoing else "completed" if current.get(tp) == replicas else "differs")
        rows.append({"topic": tp[0], "partition": tp[1], "state": state, "replicas": current.get(tp),
                     "target": replicas})
    out = Output(settings)
    if settings.json:
        out.emit(rows)
        return 0
    out.line("Status of partition reassignment:")
    for r in rows:
        name = _name(r["topic"], r["partition"])
        out.line({"in_progress": f"Reassignment of partition {name} is still in progress.",
                  "completed": f"Reassignment of partition {name} is completed.",
                  "differs": f"There is no active reassignment of partition {name}, but replica set is "
                             f"{r['replicas']} rather than {r['target']}."}[r["state"]])
    return 0


@click.command("reassign-partitions", help="Move partition replicas between brokers: execute, "
               f"verify or cancel a plan, or generate one (kafka-reassign-partitions.sh). {KAFKA_COMPATIBLE}")
@click.option("--execute", "action", flag_value="execute", help="start the moves of --reassignment-json-file")
@click.option("--verify", "action", flag_value="verify", help="report whether each move is done")
@click.option("--cancel", "action", flag_value="cancel", help="revert the moves in flight")
@click.option("--generate", "action", flag_value="generate", help="propose a plan (--topics-to-move-json-file)")
@click.option("--reassignment-json-file", type=JSON_FILE,
              help='{"version": 1, "partitions": [{"topic": T, "partition": P, "replicas": [..]}]}')
@click.option("--topics-to-move-json-file", type=JSON_FILE, help='{"topics": [{"topic": T}], "version": 1}')
@click.option("--broker-list", metavar="ID,ID", help="with --generate: the brokers to spread over")
@click.option("--disable-rack-aware", is_flag=True, help="with --generate: ignore the brokers' racks")
@client_options
def reassign_partitions(settings: ClientSettings, action: str | None, reassignment_json_file: Path | None,
                        topics_to_move_json_file: Path | None, broker_list: str | None,
                        disable_rack_aware: bool) -> int:
    if action is None:
        raise click.UsageError("choose --execute, --verify, --cancel or --generate")
    with Admin(settings) as admin:
        if action == "generate":
            if topics_to_move_json_file is None:
                raise click.UsageError("--generate needs --topics-to-move-json-file")
            _generate(admin, topics_to_move_json_file, broker_list, not disable_rack_aware)
            return 0
        if reassignment_json_file is None:
            raise click.UsageError(f"--{action} needs --reassignment-json-file")
        wanted = {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]]
                  for e in read_partitions_file(reassignment_json_file, "replicas")}
        if action == "verify":
            return _verify(settings, admin, wanted)
        names = ", ".join(_name(*tp) for tp in sorted(wanted))
        if action == "cancel":
            alter_reassignments(admin, dict.fromkeys(wanted), "cancelling the reassignment")
            click.echo(f"Successfully cancelled partition reassignment(s) for: {names}")
            return 0
        current = _current(admin, (t for t, _ in wanted))
        current = {tp: current[tp] for tp in wanted if tp in current}
        click.echo(f"Current partition replica assignment\n\n{_assignment_json(current)}\n\n"
                   "Save this to use as the --reassignment-json-file option during rollback")
        alter_reassignments(admin, dict(wanted), "reassigning")
        click.echo(f"Successfully started partition reassignment(s) for {names}")
    return 0
