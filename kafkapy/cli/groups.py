"""`kafkapy groups list|describe|reset-offsets|delete --bootstrap-server HOST:PORT`.

Why our own codec over a plain socket: the CLI must work with nothing but kafkapy installed (no
client library), and it doubles as a check that our codec speaks to a broker as a client would.
`KafkaWireClient` negotiates versions with ApiVersions and sends one request at a time.

`describe` prints, per partition of the group, the committed offset, the log end offset and the
lag between them (what `kafka-consumer-groups.sh --describe` shows), with the member that owns
the partition under the consumer protocol's assignment. `reset-offsets` is a dry run unless
`--execute`, and (like Kafka's tool) needs the group to be inactive: the broker refuses a simple
commit into a live group with UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

import argparse
import itertools
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any, TextIO, TypeVar

from kafkapy.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
)
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

__all__ = ["CliError", "KafkaWireClient", "add_parser", "decode_assignment", "run"]

M = TypeVar("M")
EARLIEST, LATEST = -2, -1
_SIZE = struct.Struct(">i")


class CliError(Exception):
    """A failure to report to the user (exit status 1), not a crash."""


class KafkaWireClient:
    """A blocking Kafka protocol client over one socket (127.0.0.1 tools and tests).

    Resource handling: use as a context manager; the socket closes on exit.
    """

    def __init__(
        self, bootstrap: str, *, client_id: str = "kafkapy-cli", timeout_s: float = 30.0
    ) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise CliError(f"--bootstrap-server must be HOST:PORT, got {bootstrap!r}")
        try:
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
        except OSError as e:
            raise CliError(f"cannot connect to {bootstrap}: {e}") from None
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self.versions: dict[int, int] = {}
        response = self.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert isinstance(response, ApiVersionsResponse)
        for v in response.api_keys:
            try:
                ours = SUPPORTED_VERSIONS.get(ApiKey(v.api_key))
            except ValueError:  # an API newer than our codec
                continue
            if ours is not None and max(ours[0], v.min_version) <= min(ours[1], v.max_version):
                self.versions[v.api_key] = min(ours[1], v.max_version)

    def __enter__(self) -> KafkaWireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def version(self, api_key: ApiKey, cap: int | None = None) -> int:
        if api_key not in self.versions:
            raise CliError(f"the broker does not support {api_key.name}")
        v = self.versions[api_key]
        return v if cap is None else min(v, cap)

    def send(self, api_key: ApiKey, version: int, msg: Any) -> Any:
        correlation_id = next(self._correlation)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), msg)
        try:
            self.sock.sendall(_SIZE.pack(len(frame)) + frame)
            size = _SIZE.unpack(self._read(4))[0]
            got, response = decode_response(api_key, version, self._read(size))
        except (OSError, ProtocolError) as e:
            raise CliError(f"{api_key.name} failed: {e}") from None
        if got != correlation_id:
            raise CliError(f"{api_key.name}: correlation id {got}, expected {correlation_id}")
        return response

    def call(self, api_key: ApiKey, msg: M, cap: int | None = None) -> Any:
        """Send `msg` at the highest version both sides speak (at most `cap`)."""
        return self.send(api_key, self.version(api_key, cap), msg)

    def _read(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise OSError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    # -- the requests the tool needs -----------------------------------------------------

    def end_offsets(self, partitions: list[tuple[str, int]], timestamp: int = LATEST) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        request = ListOffsetsRequest(
            replica_id=-1,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=timestamp)
                        for p in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        )
        response: ListOffsetsResponse = self.call(ApiKey.LIST_OFFSETS, request)
        return {
            (t.name, p.partition_index): p.offset
            for t in response.topics
            for p in t.partitions
            if p.error_code == ErrorCode.NONE
        }

    def topic_partitions(self, topic: str) -> list[int]:
        response: MetadataResponse = self.call(
            ApiKey.METADATA,
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
            cap=8,
        )
        for t in response.topics:
            if t.name == topic:
                if t.error_code != ErrorCode.NONE:
                    raise CliError(f"topic {topic}: {ErrorCode(t.error_code).name}")
                return sorted(p.partition_index for p in t.partitions)
        raise CliError(f"topic {topic} not found")

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        response: OffsetFetchResponse = self.call(
            ApiKey.OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None), cap=7
        )
        if response.error_code != ErrorCode.NONE:
            raise CliError(f"group {group}: {ErrorCode(response.error_code).name}")
        return {
            (t.name, p.partition_index): p.committed_offset
            for t in response.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer-protocol Assignment (empty if not that protocol)."""
    out: list[tuple[str, int]] = []
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
class _Row:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    member: str
    host: str
    client: str

    def cells(self) -> list[str]:
        lag = "-" if self.committed is None or self.end is None else str(self.end - self.committed)
        return [
            self.topic, str(self.partition),
            "-" if self.committed is None else str(self.committed),
            "-" if self.end is None else str(self.end),
            lag, self.member or "-", self.host or "-", self.client or "-",
        ]


def _table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for row in [header, *rows]:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def cmd_list(client: KafkaWireClient, args: argparse.Namespace, out: TextIO) -> int:
    response: ListGroupsResponse = client.call(
        ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=list(args.state or []))
    )
    if response.error_code != ErrorCode.NONE:
        raise CliError(f"ListGroups: {ErrorCode(response.error_code).name}")
    rows = sorted([g.group_id, g.group_state or "-", g.protocol_type or "-"] for g in response.groups)
    _table(out, ["GROUP", "STATE", "PROTOCOL-TYPE"], rows)
    return 0


def cmd_describe(client: KafkaWireClient, args: argparse.Namespace, out: TextIO) -> int:
    response: DescribeGroupsResponse = client.call(
        ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=list(args.group))
    )
    status = 0
    for g in response.groups:
        if g.error_code != ErrorCode.NONE:
            out.write(f"group {g.group_id}: {ErrorCode(g.error_code).name}\n")
            status = 1
            continue
        if g.group_state == "Dead":
            out.write(f"group {g.group_id} does not exist\n")
            status = 1
            continue
        owners: dict[tuple[str, int], tuple[str, str, str]] = {}
        for m in g.members:
            for tp in decode_assignment(bytes(m.member_assignment)):
                owners[tp] = (m.member_id, m.client_host, m.client_id)
        committed = client.committed(g.group_id)
        partitions = sorted(set(owners) | set(committed))
        ends = client.end_offsets(partitions) if partitions else {}
        out.write(
            f"\nGROUP {g.group_id}  state {g.group_state}  protocol {g.protocol_type}/"
            f"{g.protocol_data or '-'}  members {len(g.members)}\n"
        )
        rows = [
            _Row(t, p, committed.get((t, p)), ends.get((t, p)), *owners.get((t, p), ("", "", "")))
            for t, p in partitions
        ]
        _table(
            out,
            ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"],
            [r.cells() for r in rows],
        )
        idle = [m for m in g.members if not decode_assignment(bytes(m.member_assignment))]
        for m in idle:
            out.write(f"member {m.member_id} ({m.client_id} {m.client_host}) has no partitions\n")
    return status


def cmd_reset_offsets(client: KafkaWireClient, args: argparse.Namespace, out: TextIO) -> int:
    partitions: list[tuple[str, int]] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        chosen = [int(p) for p in parts.split(",")] if parts else client.topic_partitions(topic)
        partitions += [(topic, p) for p in chosen]
    if not partitions:
        raise CliError("no partitions to reset")
    earliest = client.end_offsets(partitions, EARLIEST)
    latest = client.end_offsets(partitions, LATEST)
    current = client.committed(args.group)
    target: dict[tuple[str, int], int] = {}
    for tp in partitions:
        if tp not in latest or tp not in earliest:
            raise CliError(f"{tp[0]}-{tp[1]}: unknown partition")
        if args.to_earliest:
            want = earliest[tp]
        elif args.to_latest:
            want = latest[tp]
        elif args.to_offset is not None:
            want = args.to_offset
        else:
            want = current.get(tp, latest[tp]) + args.shift_by
        target[tp] = min(max(want, earliest[tp]), latest[tp])
    _table(
        out, ["TOPIC", "PARTITION", "NEW-OFFSET"],
        [[t, str(p), str(o)] for (t, p), o in sorted(target.items())],
    )
    if not args.execute:
        out.write("dry run: add --execute to commit these offsets\n")
        return 0
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in sorted(target.items()):
        by_topic.setdefault(t, []).append((p, o))
    response: OffsetCommitResponse = client.call(
        ApiKey.OFFSET_COMMIT,
        OffsetCommitRequest(
            group_id=args.group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=t,
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=p, committed_offset=o, committed_metadata=""
                        )
                        for p, o in ps
                    ],
                )
                for t, ps in by_topic.items()
            ],
        ),
        cap=8,
    )
    errors = [
        f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
        for t in response.topics
        for p in t.partitions
        if p.error_code != ErrorCode.NONE
    ]
    if errors:
        hint = " (is the group still active? stop its consumers first)" if any(
            "UNKNOWN_MEMBER_ID" in e or "REBALANCE" in e for e in errors) else ""
        raise CliError("reset failed: " + ", ".join(errors) + hint)
    out.write(f"offsets of group {args.group} reset\n")
    return 0


def cmd_delete(client: KafkaWireClient, args: argparse.Namespace, out: TextIO) -> int:
    response: DeleteGroupsResponse = client.call(
        ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=list(args.group))
    )
    status = 0
    for r in response.results:
        if r.error_code == ErrorCode.NONE:
            out.write(f"deleted group {r.group_id}\n")
        else:
            out.write(f"group {r.group_id}: {ErrorCode(r.error_code).name}\n")
            status = 1
    return status


def add_parser(sub: Any) -> None:
    """Add `groups` and its subcommands to the `kafkapy` argument parser."""
    groups = sub.add_parser("groups", help="list, describe, reset or delete consumer groups")
    gsub = groups.add_subparsers(dest="groups_command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    lst = gsub.add_parser("list", parents=[common], help="list groups")
    lst.add_argument("--state", action="append", help="only groups in this state (repeatable)")
    desc = gsub.add_parser("describe", parents=[common], help="members, offsets and lag")
    desc.add_argument("--group", action="append", required=True)
    reset = gsub.add_parser("reset-offsets", parents=[common], help="move committed offsets")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P]")
    how = reset.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--shift-by", type=int)
    reset.add_argument("--execute", action="store_true", help="commit (default: dry run)")
    delete = gsub.add_parser("delete", parents=[common], help="delete empty groups")
    delete.add_argument("--group", action="append", required=True)


_COMMANDS = {
    "list": cmd_list,
    "describe": cmd_describe,
    "reset-offsets": cmd_reset_offsets,
    "delete": cmd_delete,
}


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run a `groups` subcommand; errors are printed, not raised (exit status 1)."""
    try:
        with KafkaWireClient(args.bootstrap_server) as client:
            return _COMMANDS[args.groups_command](client, args, out)
    except CliError as e:
        print(f"kafkapy groups: {e}", file=sys.stderr)
        return 1
