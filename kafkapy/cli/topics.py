"""`kafkapy topics create|list|describe|alter|delete|add-partitions` (kafka-topics.sh).

Kafka's flags and semantics: `--partitions`/`--replication-factor` default to the broker's
(-1), `--config k=v` at creation, `--if-not-exists` (create) and `--if-exists` (describe, alter,
delete: the named topics that exist, nothing for the others) turn the matching error into success,
`add-partitions --partitions N` sets the new total. Describe, alter and delete take a regular
expression as a topic ('orders-.*'), as kafka-topics.sh does, when it has a character no topic
name can have (a plain name is taken as typed). `describe` shows per partition the leader,
replicas, ISR and offline replicas (Metadata), the log start and end offsets (ListOffsets to each
leader) and the size on the leader (DescribeLogDirs), so one command answers "where is my data
and how much is there"; on a tiered topic (`remote.storage.enable`, KIP-405) also the local log
start (ListOffsets -4) and the last offset in the remote tier (-5), so the log start (-2) over
both tiers reads against them. `--under-replicated-partitions` keeps those with ISR < replicas.
`--replica-assignment 1:2,2:3,3:1` places replicas by hand as kafka-topics.sh does (partitions
separated by commas, a partition's replicas by colons, the first its preferred leader): at
creation it replaces `--partitions`/`--replication-factor`; with `add-partitions`/`alter
--partitions` it lists every partition and only the new ones' entries are sent (Kafka's rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    Output,
    check,
    client_options,
    parse_key_values,
)
from kafkapy.cli.configs import (
    TOPIC,
    alter_configs,
    describe_topic_configs,
    split_configs,
)
from kafkapy.cli.offsets import EARLIEST, EARLIEST_LOCAL, LATEST, LATEST_TIERED, TP, list_offsets
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    MetadataResponse,
)
from kafkapy.protocol.messages.create_partitions import (
    CreatePartitionsRequest_CreatePartitionsAssignment,
)
from kafkapy.protocol.messages.create_topics import CreateTopicsRequest_CreatableReplicaAssignment

__all__ = ["topics"]

TIMEOUT_MS = 30_000


def _names(args: tuple[str, ...], option: tuple[str, ...]) -> list[str]:
    names = list(dict.fromkeys([*args, *option]))
    if not names:
        raise click.UsageError("name a topic (TOPIC or --topic TOPIC)")
    return names


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _matching(admin: Admin, names: list[str], if_exists: bool) -> list[str]:
    """kafka-topics.sh's `--topic` for describe/alter/delete: a name with a character no topic
    name can have (`*`, `[`, `|`, ...) is a regular expression matched against the whole of
    every topic's name (Java's String.matches); the others are names, as typed. A pattern that
    matches nothing is an error unless `if_exists`."""
    if all(_TOPIC_NAME.fullmatch(n) for n in names):
        return names
    every = sorted(str(t.name) for t in admin.metadata(None).topics)
    out: list[str] = []
    for name in names:
        if _TOPIC_NAME.fullmatch(name):
            out.append(name)
            continue
        try:
            pattern = re.compile(name)
        except re.error as e:
            raise click.BadParameter(f"{name!r} is neither a topic name nor a regular expression ({e})",
                                     param_hint="--topic") from None
        matched = [t for t in every if pattern.fullmatch(t)]
        if not matched and not if_exists:
            raise CliError(f"no topic matches {name!r}",
                           hint="check the pattern with `kafkapy topics list`, or add --if-exists")
        out.extend(matched)
    return list(dict.fromkeys(out))


def _topic_option(func: Any) -> Any:
    func = click.option("--topic", "topic_option", multiple=True, help="a topic (Kafka's spelling)")(func)
    return click.argument("topic", nargs=-1)(func)


@click.group(help=f"Create, list, describe, alter and delete topics (kafka-topics.sh). {KAFKA_COMPATIBLE}")
def topics() -> None:
    pass


def parse_replica_assignment(text: str) -> list[list[int]]:
    """Kafka's `--replica-assignment`: `1:2,2:3` is partition 0 on [1, 2], partition 1 on [2, 3]."""
    flag = "--replica-assignment"
    partitions: list[list[int]] = []
    for index, item in enumerate(text.split(",")):
        try:
            replicas = [int(r) for r in item.strip().split(":")]
        except ValueError:
            raise click.BadParameter(
                f"partition {index}: {item.strip()!r} is not broker ids separated by ':'", param_hint=flag
            ) from None
        if len(set(replicas)) != len(replicas):
            raise click.BadParameter(f"partition {index} names a broker twice: {item.strip()}", param_hint=flag)
        if partitions and len(replicas) != len(partitions[0]):
            raise click.BadParameter(
                f"partition {index} has {len(replicas)} replicas, partition 0 has {len(partitions[0])}",
                param_hint=flag,
            )
        partitions.append(replicas)
    return partitions


def _assignment_option(func: Any) -> Any:
    return click.option(
        "--replica-assignment", metavar="B:B,B:B,...",
        help="brokers per partition by hand: partitions separated by ',', replicas by ':' "
        "(the first is the preferred leader)",
    )(func)


@topics.command()
@_topic_option
@click.option("--partitions", type=int, help="partition count [default: the broker's num.partitions]")
@click.option("--replication-factor", type=int,
              help="replicas per partition [default: the broker's default.replication.factor]")
@_assignment_option
@click.option("--config", multiple=True, metavar="K=V", help="a topic config (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="an existing topic is not an error")
@click.option("--validate-only", is_flag=True, help="let the controller check it, create nothing")
@client_options
def create(
    settings: ClientSettings, topic: tuple[str, ...], topic_option: tuple[str, ...], partitions: int | None,
    replication_factor: int | None, replica_assignment: str | None, config: tuple[str, ...],
    if_not_exists: bool, validate_only: bool,
) -> int:
    """Create topics."""
    names = _names(topic, topic_option)
    configs = parse_key_values(split_configs(config), "--config")
    assignments: list[CreateTopicsRequest_CreatableReplicaAssignment] = []
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise click.UsageError("--replica-assignment replaces --partitions and --replication-factor")
        assignments = [
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=replicas)
            for i, replicas in enumerate(parse_replica_assignment(replica_assignment))
        ]
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=n,
                num_partitions=-1 if partitions is None else partitions,
                replication_factor=-1 if replication_factor is None else replication_factor,
                assignments=list(assignments),
                configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
            )
            for n in names
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=validate_only,
    )
    with Admin(settings) as admin:
        response: CreateTopicsResponse = admin.call(ApiKey.CREATE_TOPICS, request)
    results: list[dict[str, Any]] = []
    for r in response.topics:
        if r.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and if_not_exists:
            results.append({"topic": r.name, "created": False, "exists": True})
            continue
        check(r.error_code, f"creating topic {r.name}", r.error_message)
        results.append({"topic": r.name, "created": not validate_only, "partitions": r.num_partitions,
                        "replication_factor": r.replication_factor, "topic_id": str(r.topic_id)})
    out = Output(settings)
    if settings.json:
        out.emit(results)
    for item in results if not settings.json else []:
        if item.get("exists"):
            out.line(f"topic {item['topic']} already exists")
        else:
            verb = "created" if item["created"] else "would create"
            out.line(f"{verb} topic {item['topic']} ({item['partitions']} partitions, "
                     f"replication factor {item['replication_factor']})")
    return 0


def _metadata(admin: Admin, names: list[str] | None, exclude_internal: bool,
              if_exists: bool = False) -> MetadataResponse:
    """Metadata of `names` (None: all); a missing one fails, or with `if_exists` is left out."""
    md = admin.metadata(names)
    if if_exists:
        md.topics = [t for t in md.topics if t.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    for t in md.topics:
        check(t.error_code, f"topic {t.name}")
    if exclude_internal:
        md.topics = [t for t in md.topics if not t.is_internal]
    md.topics.sort(key=lambda t: str(t.name))
    return md


@topics.command("list")
@click.option("--exclude-internal", is_flag=True, help="leave out __consumer_offsets and the like")
@client_options
def list_cmd(settings: ClientSettings, exclude_internal: bool) -> int:
    """List topics."""
    with Admin(settings) as admin:
        md = _metadata(admin, None, exclude_internal)
    items = [
        {"topic": t.name, "partitions": len(t.partitions),
         "replication_factor": max((len(p.replica_nodes) for p in t.partitions), default=0),
         "internal": t.is_internal, "topic_id": str(t.topic_id)}
        for t in md.topics
    ]
    Output(settings).records(
        [("topic", "TOPIC"), ("partitions", "PARTITIONS"), ("replication_factor", "REPLICAS"),
         ("internal", "INTERNAL")], items,
    )
    return 0


def _sizes(admin: Admin, leaders: Iterable[int]) -> dict[tuple[str, int], int]:
    """Partition sizes in bytes as each leader reports them (DescribeLogDirs)."""
    sizes: dict[tuple[str, int], int] = {}
    for node in set(leaders):
        if node < 0:
            continue
        try:
            r: DescribeLogDirsResponse = admin.broker(node).call(
                ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None)
            )
        except CliError:  # an older broker without DescribeLogDirs: sizes stay unknown
            continue
        for d in r.results:
            for t in d.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        sizes.setdefault((t.name, p.partition_index), 0)
                        sizes[(t.name, p.partition_index)] += p.partition_size
    return sizes


def _tiers(admin: Admin, tiered: list[TP]) -> dict[TP, dict[str, int | None]]:
    """Per partition of a tiered topic (KIP-405), the local log start (ListOffsets -4) and the
    highest offset in the remote tier (-5; -1 when nothing is remote yet)."""
    if not tiered:
        return {}
    local = list_offsets(admin, tiered, EARLIEST_LOCAL, skip_unreachable=True)
    remote = list_offsets(admin, tiered, LATEST_TIERED, skip_unreachable=True)
    return {tp: {"local_log_start_offset": local.get(tp), "highest_tiered_offset": remote.get(tp)}
            for tp in tiered}


def describe_partitions(
    admin: Admin, md: MetadataResponse, tiered_topics: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """A row per partition; those of `tiered_topics` also say where each tier begins and ends
    (`log_start_offset` is then over both tiers, as ListOffsets EARLIEST answers)."""
    leader_of = {(str(t.name), p.partition_index): p.leader_id for t in md.topics for p in t.partitions}
    starts = list_offsets(admin, leader_of, EARLIEST, skip_unreachable=True) if leader_of else {}
    ends = list_offsets(admin, leader_of, LATEST, skip_unreachable=True) if leader_of else {}
    tiered = set(tiered_topics)
    tiers = _tiers(admin, [tp for tp in leader_of if tp[0] in tiered])
    sizes = _sizes(admin, leader_of.values())
    rows = []
    for t in md.topics:
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            tp = (str(t.name), p.partition_index)
            rows.append({
                "topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
                "leader_epoch": p.leader_epoch, "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
                "offline_replicas": list(p.offline_replicas), "log_start_offset": starts.get(tp),
                "log_end_offset": ends.get(tp), "size_bytes": sizes.get(tp),
                "error": None if p.error_code == 0 else ErrorCode(p.error_code).name,
                **tiers.get(tp, {}),
            })
    return rows


def _ids(nodes: list[int]) -> str:
    return ",".join(map(str, nodes)) or "-"


def _if_exists_option(func: Any) -> Any:
    return click.option("--if-exists", is_flag=True,
                        help="act on the named topics that exist; a missing one is not an error")(func)


@topics.command()
@_topic_option
@click.option("--under-replicated-partitions", is_flag=True, help="only partitions whose ISR is short")
@click.option("--unavailable-partitions", is_flag=True, help="only partitions without a leader")
@click.option("--under-min-isr-partitions", is_flag=True, help="only partitions with ISR < min.insync.replicas")
@click.option("--at-min-isr-partitions", is_flag=True, help="only partitions with ISR = min.insync.replicas")
@click.option("--exclude-internal", is_flag=True, help="leave out internal topics")
@_if_exists_option
@client_options
def describe(
    settings: ClientSettings, topic: tuple[str, ...], topic_option: tuple[str, ...],
    under_replicated_partitions: bool, unavailable_partitions: bool, under_min_isr_partitions: bool,
    at_min_isr_partitions: bool, exclude_internal: bool, if_exists: bool,
) -> int:
    """Partitions (leader, replicas, ISR, offline, offsets, size) and configs of topics (all if none named)."""
    names = list(dict.fromkeys([*topic, *topic_option])) or None
    by_isr = under_min_isr_partitions or at_min_isr_partitions
    with Admin(settings) as admin:
        if names is not None:
            names = _matching(admin, names, if_exists)
        md = _metadata(admin, names, exclude_internal, if_exists)
        configs = describe_topic_configs(admin, [str(t.name) for t in md.topics])
        rows = describe_partitions(admin, md, tiered_topics(configs))
    if under_replicated_partitions:
        rows = [r for r in rows if len(r["isr"]) < len(r["replicas"])]
    if unavailable_partitions:
        rows = [r for r in rows if r["leader"] < 0]
    if by_isr:
        min_isr = {t: int(next((c["value"] for c in cs if c["name"] == "min.insync.replicas"), "1"))
                   for t, cs in configs.items()}
        rows = [r for r in rows if (len(r["isr"]) < min_isr[str(r["topic"])] if under_min_isr_partitions
                                    else len(r["isr"]) == min_isr[str(r["topic"])])]
    filtered = under_replicated_partitions or unavailable_partitions or by_isr
    out = Output(settings)
    if settings.json:
        out.emit([
            {"topic": t.name, "topic_id": str(t.topic_id), "internal": t.is_internal,
             "partitions": [r for r in rows if r["topic"] == t.name],
             "configs": {c["name"]: c["value"] for c in configs.get(str(t.name), [])
                         if c["source"] != "DEFAULT_CONFIG"}}
            for t in md.topics
        ])
        return 0
    for t in md.topics:
        mine = [r for r in rows if r["topic"] == t.name]
        if not mine and filtered:
            continue
        set_configs = [f"{c['name']}={c['value']}" for c in configs.get(str(t.name), [])
                       if c["source"] == "DYNAMIC_TOPIC_CONFIG"]
        out.line(f"\nTopic {t.name}  id {t.topic_id}  partitions {len(t.partitions)}"
                 f"{'  internal' if t.is_internal else ''}  configs {','.join(set_configs) or '-'}")
        _partition_table(out, mine)
    return 0


def tiered_topics(configs: dict[str, list[dict[str, Any]]]) -> set[str]:
    """The topics whose `remote.storage.enable` is true (tiered storage, KIP-405)."""
    return {t for t, cs in configs.items()
            if any(c["name"] == "remote.storage.enable" and str(c["value"]).lower() == "true" for c in cs)}


def _partition_table(out: Output, rows: list[dict[str, Any]]) -> None:
    """The partitions of one topic; a tiered topic's with LOCAL-START (where the local log
    begins: below it, data is only remote) and TIERED-END (the last offset copied)."""
    headers = ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "LOG-START", "LOG-END", "SIZE"]
    tiered = any("local_log_start_offset" in r for r in rows)
    if tiered:
        headers[6:6] = ["LOCAL-START", "TIERED-END"]
    table = []
    for r in rows:
        row = [r["partition"], r["leader"], _ids(r["replicas"]), _ids(r["isr"]), _ids(r["offline_replicas"]),
               r["log_start_offset"], r["log_end_offset"], r["size_bytes"]]
        if tiered:
            row[6:6] = [r.get("local_log_start_offset"), r.get("highest_tiered_offset")]
        table.append(row)
    out.table(headers, table)


@topics.command()
@_topic_option
@click.option("--if-exists", is_flag=True, help="a missing topic is not an error")
@client_options
def delete(settings: ClientSettings, topic: tuple[str, ...], topic_option: tuple[str, ...], if_exists: bool) -> int:
    """Delete topics."""
    names = _names(topic, topic_option)
    with Admin(settings) as admin:
        names = _matching(admin, names, if_exists)
        response = DeleteTopicsResponse()
        if names:
            response = admin.call(
                ApiKey.DELETE_TOPICS,
                DeleteTopicsRequest(topic_names=names, timeout_ms=TIMEOUT_MS,
                                    topics=[DeleteTopicsRequest.DeleteTopicState(name=n) for n in names]),
            )
    results: list[dict[str, Any]] = []
    for r in response.responses:
        if r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and if_exists:
            results.append({"topic": r.name, "deleted": False})
            continue
        check(r.error_code, f"deleting topic {r.name}", r.error_message)
        results.append({"topic": r.name, "deleted": True})
    out = Output(settings)
    if settings.json:
        out.emit(results)
    else:
        for item in results:
            gone = item["deleted"]
            out.line(f"deleted topic {item['topic']}" if gone else f"topic {item['topic']} does not exist")
    return 0


def _new_assignments(
    admin: Admin, names: list[str], total: int, replica_assignment: str | None
) -> list[CreatePartitionsRequest_CreatePartitionsAssignment] | None:
    """The entries of `--replica-assignment` past each topic's current partitions, or None."""
    if replica_assignment is None:
        return None
    wanted = parse_replica_assignment(replica_assignment)
    if len(wanted) != total:
        raise click.UsageError(
            f"--replica-assignment lists {len(wanted)} partitions, --partitions asks for {total}")
    current = {len(t.partitions) for t in _metadata(admin, names, False).topics}
    if len(current) != 1:
        raise click.UsageError("--replica-assignment needs topics with the same partition count")
    return [CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=replicas)
            for replicas in wanted[current.pop():]]


def _add_partitions(admin: Admin, names: list[str], total: int, replica_assignment: str | None = None) -> None:
    assignments = _new_assignments(admin, names, total, replica_assignment)
    response: CreatePartitionsResponse = admin.call(
        ApiKey.CREATE_PARTITIONS,
        CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=n, count=total, assignments=assignments)
                    for n in names],
            timeout_ms=TIMEOUT_MS,
        ),
    )
    for r in response.results:
        check(r.error_code, f"topic {r.name} to {total} partitions", r.error_message)


@topics.command("add-partitions")
@_topic_option
@click.option("--partitions", type=click.IntRange(min=1), required=True, help="the new total partition count")
@_assignment_option
@_if_exists_option
@client_options
def add_partitions(
    settings: ClientSettings, topic: tuple[str, ...], topic_option: tuple[str, ...], partitions: int,
    replica_assignment: str | None, if_exists: bool,
) -> int:
    """Grow topics to N partitions (Kafka never shrinks a topic)."""
    names = _names(topic, topic_option)
    with Admin(settings) as admin:
        names = _matching(admin, names, if_exists)
        if if_exists:
            names = [str(t.name) for t in _metadata(admin, names, False, if_exists=True).topics]
        if names:
            _add_partitions(admin, names, partitions, replica_assignment)
    out = Output(settings)
    if settings.json:
        out.emit([{"topic": n, "partitions": partitions} for n in names])
    else:
        for n in names:
            out.line(f"topic {n} now has {partitions} partitions")
    return 0


@topics.command()
@_topic_option
@click.option("--partitions", type=click.IntRange(min=1), help="the new total partition count")
@_assignment_option
@click.option("--config", multiple=True, metavar="K=V", help="set a topic config (repeatable)")
@click.option("--delete-config", multiple=True, metavar="K", help="remove a topic config (repeatable)")
@_if_exists_option
@client_options
def alter(
    settings: ClientSettings, topic: tuple[str, ...], topic_option: tuple[str, ...], partitions: int | None,
    replica_assignment: str | None, config: tuple[str, ...], delete_config: tuple[str, ...], if_exists: bool,
) -> int:
    """Change topics' partition count or configs."""
    names = _names(topic, topic_option)
    add = parse_key_values(split_configs(config), "--config")
    delete = split_configs(delete_config)
    if partitions is None and not add and not delete:
        raise click.UsageError("give --partitions, --config or --delete-config")
    if replica_assignment is not None and partitions is None:
        raise click.UsageError("--replica-assignment goes with --partitions")
    with Admin(settings) as admin:
        # a missing topic fails here with its own error code, or is left alone with --if-exists
        names = [str(t.name) for t in _metadata(admin, _matching(admin, names, if_exists), False, if_exists).topics]
        if add or delete:
            for n in names:
                alter_configs(admin, TOPIC, n, add, delete)
        if partitions is not None and names:
            _add_partitions(admin, names, partitions, replica_assignment)
    out = Output(settings)
    if settings.json:
        out.emit([{"topic": n, "partitions": partitions, "set": add, "deleted": delete} for n in names])
    else:
        for n in names:
            out.line(f"altered topic {n}")
    return 0
