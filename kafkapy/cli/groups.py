"""`kafkapy groups list|describe|reset-offsets|delete|delete-offsets` (kafka-consumer-groups.sh).

`describe` prints, per partition of the group, the committed offset, the log end offset and the
lag between them (what `kafka-consumer-groups.sh --describe` shows), with the member that owns
the partition under the consumer protocol's assignment; `--members` and `--state` are Kafka's
other views. `reset-offsets` is a dry run unless `--execute` and, like Kafka's tool, refuses a
group that is not inactive before printing anything: the broker would refuse an admin commit into
a live group with UNKNOWN_MEMBER_ID. Nothing here creates a topic (Metadata asks with
allow_auto_topic_creation off), so a dry run with a typo changes nothing.
"""

from __future__ import annotations

import csv
import functools
import struct
import sys
import time
from dataclasses import dataclass
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
    parse_datetime_ms,
    parse_duration_ms,
)
from kafkapy.cli.offsets import EARLIEST, LATEST, commit_offsets, committed_offsets, list_offsets
from kafkapy.cli.wire import Admin, KafkaWireClient
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)

__all__ = ["KafkaWireClient", "decode_assignment", "groups"]

TP = tuple[str, int]
INACTIVE = ("Empty", "Dead")


def decode_assignment(data: bytes) -> list[TP]:
    """The partitions of a consumer-protocol Assignment (empty if not that protocol)."""
    out: list[TP] = []
    try:
        pos = 2
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (count,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for _ in range(max(count, 0)):
                out.append((topic, struct.unpack_from(">i", data, pos)[0]))
                pos += 4
    except (struct.error, UnicodeDecodeError):
        return []
    return out


@dataclass
class GroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: list[dict[str, Any]]


def _describe(admin: Admin, group: str) -> GroupView:
    node = admin.find_coordinator(group)
    r: DescribeGroupsResponse = admin.broker(node).call(
        ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group])
    )
    g = r.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        # Kafka 4 answers this for a KIP-848 consumer group: ConsumerGroupDescribe knows it
        return _describe_consumer_group(admin, group, node) or GroupView(group, "Dead", "", "", node, [])
    check(g.error_code, f"group {group}")
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "partitions": decode_assignment(bytes(m.member_assignment)),
        }
        for m in g.members
    ]
    return GroupView(g.group_id, g.group_state, g.protocol_type, g.protocol_data, node, members)


def _describe_consumer_group(admin: Admin, group: str, node: int) -> GroupView | None:
    """A KIP-848 (group.protocol=consumer) group, or None when there is none by that name."""
    conn = admin.broker(node)
    if ApiKey.CONSUMER_GROUP_DESCRIBE not in conn.versions:
        return None
    r: ConsumerGroupDescribeResponse = conn.call(
        ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(group_ids=[group])
    )
    g = r.groups[0]
    if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND or g.group_state.lower() == "dead":
        return None
    check(g.error_code, f"group {group}", g.error_message)
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "host": m.client_host,
            "partitions": [(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions],
        }
        for m in g.members
    ]
    state = g.group_state[:1].upper() + g.group_state[1:]
    return GroupView(group, state, "consumer", g.assignor_name, node, members)


def _all_groups(admin: Admin) -> list[str]:
    response: ListGroupsResponse = admin.call(ApiKey.LIST_GROUPS, ListGroupsRequest())
    check(response.error_code, "ListGroups")
    return sorted(g.group_id for g in response.groups)


def _group_option(func: Any) -> Any:
    """`--group G` (Kafka's spelling, repeatable) or the group names as arguments, as
    `topics describe T` takes topics: both end up in the command's `group`."""

    @functools.wraps(func)
    def merged(*args: Any, group: tuple[str, ...], group_names: tuple[str, ...], **kwargs: Any) -> Any:
        return func(*args, group=tuple(dict.fromkeys([*group_names, *group])), **kwargs)

    merged = click.option("--group", multiple=True, help="the group (repeatable)")(merged)
    return click.argument("group_names", metavar="[GROUP]...", nargs=-1)(merged)


def _chosen_groups(admin: Admin, group: tuple[str, ...], all_groups: bool) -> list[str]:
    if all_groups:
        return _all_groups(admin)
    if not group:
        raise click.UsageError("name a group with --group, or pass --all-groups")
    return list(group)


@click.group(help=f"List, describe, reset or delete consumer groups (kafka-consumer-groups.sh). {KAFKA_COMPATIBLE}")
def groups() -> None:
    pass


@groups.command("list")
@click.option("--state", multiple=True, help="only groups in this state (repeatable)")
@client_options
def list_cmd(settings: ClientSettings, state: tuple[str, ...]) -> int:
    """List the groups."""
    with Admin(settings) as admin:
        response: ListGroupsResponse = admin.call(
            ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=list(state))
        )
    check(response.error_code, "ListGroups")
    items = sorted(
        (
            {"group": g.group_id, "state": g.group_state or None, "protocol_type": g.protocol_type or None,
             "type": g.group_type or None}
            for g in response.groups
        ),
        key=lambda i: str(i["group"]),
    )
    Output(settings).records(
        [("group", "GROUP"), ("state", "STATE"), ("protocol_type", "PROTOCOL-TYPE")], items
    )
    return 0


def _offset_rows(admin: Admin, view: GroupView) -> list[dict[str, Any]]:
    owners: dict[TP, dict[str, Any]] = {}
    for m in view.members:
        for tp in m["partitions"]:
            owners[tp] = m
    committed = committed_offsets(admin, view.group_id)
    partitions = sorted(set(owners) | set(committed))
    # offsets may outlive their topic: those partitions show no log end instead of failing
    existing = {(str(t.name), p.partition_index) for t in admin.metadata({t for t, _ in partitions}).topics
                if t.error_code == ErrorCode.NONE for p in t.partitions} if partitions else set()
    ends = list_offsets(admin, [tp for tp in partitions if tp in existing]) if existing else {}
    rows = []
    for tp in partitions:
        c, e, m = committed.get(tp), ends.get(tp), owners.get(tp, {})
        rows.append({
            "group": view.group_id, "topic": tp[0], "partition": tp[1], "current_offset": c,
            "log_end_offset": e, "lag": None if c is None or e is None else e - c,
            "consumer_id": m.get("member_id"), "host": m.get("host"), "client_id": m.get("client_id"),
        })
    return rows


_OFFSET_COLUMNS = [
    ("topic", "TOPIC"), ("partition", "PARTITION"), ("current_offset", "CURRENT-OFFSET"),
    ("log_end_offset", "LOG-END-OFFSET"), ("lag", "LAG"), ("consumer_id", "CONSUMER-ID"),
    ("host", "HOST"), ("client_id", "CLIENT-ID"),
]


def _by_topic(partitions: list[TP]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out


def _assignment_text(assignment: dict[str, list[int]]) -> str:
    """kafka-consumer-groups.sh --members --verbose: `t1(0,1),t2(3)`, `-` for none."""
    return ",".join(f"{t}({','.join(map(str, ps))})" for t, ps in assignment.items()) or "-"


@groups.command()
@_group_option
@click.option("--all-groups", is_flag=True, help="every group")
@click.option("--members", "view", flag_value="members", help="the members and their partition counts")
@click.option("--state", "view", flag_value="state", help="state, coordinator, assignor, member count")
@click.option("--offsets", "view", flag_value="offsets", default=True, help="offsets and lag (default)")
@click.option("--verbose", is_flag=True, help="with --members: each member's partitions (ASSIGNMENT)")
@client_options
def describe(settings: ClientSettings, group: tuple[str, ...], all_groups: bool, view: str, verbose: bool) -> int:
    """Offsets and lag per partition, or the members (--members), or the state (--state)."""
    out = Output(settings)
    status = 0
    documents = []
    with Admin(settings) as admin:
        for name in _chosen_groups(admin, group, all_groups):
            g = _describe(admin, name)
            rows = _offset_rows(admin, g) if view == "offsets" else []
            if g.state == "Dead" and not rows:
                click.echo(f"kafkapy: group {name} does not exist", err=True)
                status = 1
                continue
            members = [{**m, "group": name, "partitions": len(m["partitions"]),
                        "assignment": _by_topic(m["partitions"])} for m in g.members]
            state = {"group": name, "coordinator": g.coordinator, "assignment_strategy": g.protocol or None,
                     "state": g.state, "members": len(g.members)}
            documents.append({**state, "protocol_type": g.protocol_type, "member_list": members,
                              "offsets": rows})
            if settings.json:
                continue
            if view == "members":
                columns = [("group", "GROUP"), ("member_id", "CONSUMER-ID"), ("host", "HOST"),
                           ("client_id", "CLIENT-ID"), ("partitions", "#PARTITIONS")]
                if verbose:
                    columns.append(("assigned", "ASSIGNMENT"))
                out.records(columns, [{**m, "assigned": _assignment_text(m["assignment"])} for m in members])
            elif view == "state":
                out.records([("group", "GROUP"), ("coordinator", "COORDINATOR (ID)"),
                             ("assignment_strategy", "ASSIGNMENT-STRATEGY"), ("state", "STATE"),
                             ("members", "#MEMBERS")], [state])
            else:
                out.line(f"\nGROUP {name}  state {g.state}  protocol {g.protocol_type or '-'}/"
                         f"{g.protocol or '-'}  members {len(g.members)}")
                out.records(_OFFSET_COLUMNS, rows)
    if settings.json:
        out.emit(documents)
    return status


def _partitions(admin: Admin, specs: tuple[str, ...], group_topics: list[TP]) -> list[TP]:
    if not specs:
        return sorted(group_topics)
    out: list[TP] = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        try:
            chosen = [int(p) for p in parts.split(",")] if parts else admin.topic_partitions(topic)
        except ValueError:
            raise click.BadParameter(f"{spec!r}: partitions are numbers", param_hint="--topic") from None
        known = set(admin.topic_partitions(topic))
        for p in chosen:
            if p not in known:
                raise CliError(f"{topic}-{p}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        out += [(topic, p) for p in chosen]
    return out


def _read_plan(path: Path, group: str) -> dict[TP, int]:
    """Kafka's --export CSV: TOPIC,PARTITION,OFFSET rows, or GROUP,TOPIC,PARTITION,OFFSET rows
    (of several groups: only `group`'s are its plan)."""
    plan: dict[TP, int] = {}
    with path.open(newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) == 4 and row[0] != group:
                continue
            try:
                topic, partition, offset = row[-3], int(row[-2]), int(row[-1])
            except (IndexError, ValueError):
                raise click.BadParameter(
                    f"{path}:{n}: expected TOPIC,PARTITION,OFFSET (or GROUP,TOPIC,PARTITION,OFFSET)",
                    param_hint="--from-file",
                ) from None
            plan[(topic, partition)] = offset
    return plan


@dataclass
class ResetMode:
    to_earliest: bool
    to_latest: bool
    to_current: bool
    to_offset: int | None
    shift_by: int | None
    to_datetime: str | None
    by_duration: str | None
    from_file: Path | None

    def chosen(self) -> int:
        flags = [self.to_earliest, self.to_latest, self.to_current]
        values = [self.to_offset, self.shift_by, self.to_datetime, self.by_duration, self.from_file]
        return sum(flags) + sum(v is not None for v in values)


def _targets(admin: Admin, group: str, mode: ResetMode, topics: tuple[str, ...], all_topics: bool) -> dict[TP, int]:
    current = committed_offsets(admin, group)
    if mode.from_file is not None:
        plan = _read_plan(mode.from_file, group)
        partitions = sorted(plan)
    else:
        if not topics and not all_topics:
            raise click.UsageError("name partitions with --topic TOPIC[:P,P], or pass --all-topics")
        partitions = _partitions(admin, topics, list(current))
        plan = {}
    if not partitions:
        raise CliError(f"group {group} has no committed offsets to reset")
    earliest = list_offsets(admin, partitions, EARLIEST)
    latest = list_offsets(admin, partitions, LATEST)
    by_time: dict[TP, int] = {}
    if mode.to_datetime is not None or mode.by_duration is not None:
        at = (parse_datetime_ms(mode.to_datetime) if mode.to_datetime is not None
              else int(time.time() * 1000) - abs(parse_duration_ms(mode.by_duration or "0s")))
        by_time = list_offsets(admin, partitions, at)
    target: dict[TP, int] = {}
    for tp in partitions:
        if tp not in latest or tp not in earliest:
            raise CliError(f"{tp[0]}-{tp[1]}: no leader answers for it", ErrorCode.LEADER_NOT_AVAILABLE)
        if mode.to_earliest:
            want = earliest[tp]
        elif mode.to_latest:
            want = latest[tp]
        elif mode.to_current:
            want = current.get(tp, latest[tp])
        elif mode.to_offset is not None:
            want = mode.to_offset
        elif mode.shift_by is not None:
            want = current.get(tp, latest[tp]) + mode.shift_by
        elif tp in plan:
            want = plan[tp]
        else:  # by time: no record at or after it means the end
            want = by_time.get(tp, -1)
            want = latest[tp] if want < 0 else want
        target[tp] = min(max(want, earliest[tp]), latest[tp])
    return target


@groups.command("reset-offsets")
@click.option("--group", multiple=True, help="the group (repeatable)")
@click.option("--all-groups", is_flag=True, help="every group")
@click.option("--topic", multiple=True, metavar="TOPIC[:P,P]", help="partitions to reset (repeatable)")
@click.option("--all-topics", is_flag=True, help="every partition the group has an offset for")
@click.option("--to-earliest", is_flag=True)
@click.option("--to-latest", is_flag=True)
@click.option("--to-current", is_flag=True)
@click.option("--to-offset", type=int)
@click.option("--shift-by", type=int, help="move the committed offsets by N (negative: back)")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS", help="first offset at or after it")
@click.option("--by-duration", metavar="DURATION", help="first offset this long ago (PT10M, 10m)")
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="CSV of TOPIC,PARTITION,OFFSET (Kafka's --export format)")
@click.option("--dry-run/--execute", default=True, help="show the plan (default) or commit it")
@click.option("--export", is_flag=True,
              help="print the plan as CSV for --from-file (TOPIC,PARTITION,OFFSET; GROUP first for several groups)")
@client_options
def reset_offsets(
    settings: ClientSettings, group: tuple[str, ...], all_groups: bool, topic: tuple[str, ...],
    all_topics: bool, dry_run: bool, export: bool, **modes: Any,
) -> int:
    """Move committed offsets of inactive groups (a dry run unless --execute)."""
    mode = ResetMode(**modes)
    if export and settings.json:
        raise click.UsageError("--export and --json are two output formats: choose one")
    if mode.chosen() != 1:
        raise click.UsageError(
            "choose exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--shift-by, --to-datetime, --by-duration, --from-file"
        )
    out = Output(settings)
    results = []
    with Admin(settings) as admin:
        for name in _chosen_groups(admin, group, all_groups):
            state = _describe(admin, name).state
            if state.capitalize() not in INACTIVE:
                raise CliError(
                    f"assignments can only be reset if group {name} is inactive, but its current "
                    f"state is {state}",
                    hint="stop its consumers first (Kafka refuses an admin commit into a live "
                    "group with UNKNOWN_MEMBER_ID)",
                )
            target = _targets(admin, name, mode, topic, all_topics)
            if not dry_run:
                commit_offsets(admin, name, target)
            results += [{"group": name, "topic": t, "partition": p, "new_offset": o}
                        for (t, p), o in sorted(target.items())]
    if export:
        _export(results)
        return 0
    out.records([("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"),
                 ("new_offset", "NEW-OFFSET")], results)
    if not settings.json:
        out.line("dry run: add --execute to commit these offsets" if dry_run else "offsets committed")
    return 0


def _export(results: list[dict[str, Any]]) -> None:
    """kafka-consumer-groups.sh --export: the plan as CSV, with the group column only when it
    covers several groups (Kafka's two layouts)."""
    several = len({r["group"] for r in results}) > 1
    writer = csv.writer(sys.stdout, lineterminator="\n")
    for r in results:
        row = [r["topic"], r["partition"], r["new_offset"]]
        writer.writerow([r["group"], *row] if several else row)


@groups.command()
@_group_option
@click.option("--all-groups", is_flag=True, help="every group")
@client_options
def delete(settings: ClientSettings, group: tuple[str, ...], all_groups: bool) -> int:
    """Delete empty groups and their offsets."""
    results = []
    with Admin(settings) as admin:
        for name in _chosen_groups(admin, group, all_groups):
            response: DeleteGroupsResponse = admin.coordinator(name).call(
                ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=[name])
            )
            results += [(r.group_id, r.error_code) for r in response.results]
    return _report(settings, results, "deleted group")


def _report(settings: ClientSettings, results: list[tuple[str, int]], done: str) -> int:
    out = Output(settings)
    if settings.json:
        out.emit([{"name": n, "error": None if c == 0 else ErrorCode(c).name} for n, c in results])
    status = 0
    for name, code in results:
        if code == ErrorCode.NONE:
            if not settings.json:
                out.line(f"{done} {name}")
        else:
            click.echo(f"kafkapy: {CliError(name, code)}", err=True)
            status = 1
    return status


@groups.command("delete-offsets")
@click.option("--group", required=True)
@click.option("--topic", multiple=True, required=True, metavar="TOPIC[:P,P]")
@client_options
def delete_offsets(settings: ClientSettings, group: str, topic: tuple[str, ...]) -> int:
    """Delete a group's committed offsets for some partitions (the group must not consume them)."""
    with Admin(settings) as admin:
        partitions = _partitions(admin, topic, [])
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        request = OffsetDeleteRequest(group_id=group, topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(
                name=t, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps]
            ) for t, ps in by_topic.items()
        ])
        response: OffsetDeleteResponse = admin.coordinator(group).call(ApiKey.OFFSET_DELETE, request)
    check(response.error_code, f"group {group}")
    results = [(f"{t.name}-{p.partition_index}", p.error_code) for t in response.topics for p in t.partitions]
    return _report(settings, results, f"deleted the offset of group {group} for")
