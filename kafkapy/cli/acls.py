"""`kafkapy acls create|list|delete` (kafka-acls.sh --add / --list / --remove).

Kafka's flags: resources `--topic`, `--group`, `--transactional-id` (repeatable), `--cluster`,
`--delegation-token`; `--resource-pattern-type` LITERAL (default) or PREFIXED, and for `list` /
`delete` also ANY (any pattern type, the exact name) and MATCH (every ACL that applies to the
named resource: its literal name, the wildcard `*`, the prefixes of the name); principals
`--allow-principal` / `--deny-principal` (`User:name`, `User:*`), hosts `--allow-host` /
`--deny-host` (default `*`), `--operation` (repeatable; `create` defaults to ALL, and refuses an
operation the resource type does not have, as kafka-acls.sh does); `create --producer` /
`--consumer` add what a producer (WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on the
transactional ids) or a consumer (READ, DESCRIBE on the topics, READ on the group) needs.
`create` adds every combination of resource x principal x host x operation, as kafka-acls.sh
does; `delete` removes what each resource's filter matches (narrowed by the principals, hosts
and operations given) and prints what it removed; `list` filters by `--principal` too.
The broker needs an authorizer (StandardAuthorizer); without one it answers SECURITY_DISABLED.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from kafkapy.authorizer import SUPPORTED_OPERATIONS
from kafkapy.authorizer.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    Output,
    check,
    client_options,
)
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkapy.protocol.messages.create_acls import CreateAclsRequest_AclCreation
from kafkapy.protocol.messages.delete_acls import DeleteAclsRequest_DeleteAclsFilter

__all__ = ["acls"]

E = TypeVar("E", bound=enum.IntEnum)
F = TypeVar("F", bound=Callable[..., Any])
_COLUMNS = [
    ("resource_type", "RESOURCE-TYPE"), ("name", "NAME"), ("pattern_type", "PATTERN"),
    ("principal", "PRINCIPAL"), ("host", "HOST"), ("operation", "OPERATION"),
    ("permission", "PERMISSION"),
]
#: kafka-acls.sh's spelling (ClusterAction, DescribeConfigs, ...) by its letters in lower case
#: without underscores, so CLUSTER_ACTION, cluster_action and ClusterAction all name one
_OPERATIONS = {
    op.name.replace("_", "").lower(): op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
_KAFKA_NAMES = ", ".join(op.name.title().replace("_", "") for op in _OPERATIONS.values())


def _operations(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> list[AclOperation]:
    ops: list[AclOperation] = []
    for value in values:
        op = _OPERATIONS.get(value.replace("_", "").replace("-", "").lower())
        if op is None:
            raise click.BadParameter(f"{value!r} is none of {_KAFKA_NAMES}")
        ops.append(op)
    return ops


def _name(enum_type: type[E], code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return str(code)


def _row(resource_type: int, name: str, pattern: int, principal: str, host: str,
         operation: int, permission: int) -> dict[str, Any]:
    return {
        "resource_type": _name(ResourceType, resource_type), "name": name,
        "pattern_type": _name(PatternType, pattern), "principal": principal, "host": host,
        "operation": _name(AclOperation, operation), "permission": _name(AclPermissionType, permission),
    }


def _resources(topic: Sequence[str], group: Sequence[str], transactional_id: Sequence[str],
               cluster: bool, delegation_token: Sequence[str]) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in topic]
    out += [(ResourceType.GROUP, g) for g in group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in transactional_id]
    out += [(ResourceType.DELEGATION_TOKEN, t) for t in delegation_token]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(allow: Sequence[str], deny: Sequence[str], allow_hosts: Sequence[str],
             deny_hosts: Sequence[str]) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) for every principal given, with its hosts (default `*`)."""
    out = [(p, h, AclPermissionType.ALLOW) for p in allow for h in (allow_hosts or ["*"])]
    out += [(p, h, AclPermissionType.DENY) for p in deny for h in (deny_hosts or ["*"])]
    return out


def _check_principals(principals: Iterable[str]) -> None:
    for p in principals:
        if ":" not in p:
            raise click.BadParameter(f"a principal is TYPE:NAME (User:alice, User:*), got {p!r}")


def _check_operations(resources: Iterable[tuple[ResourceType, str]], operations: Sequence[AclOperation]) -> None:
    """kafka-acls.sh's check: an operation the resource type does not have is a usage error."""
    for rtype, _ in resources:
        valid = {*SUPPORTED_OPERATIONS.get(rtype, ()), AclOperation.ALL}
        if any(op not in valid for op in operations):
            names = ", ".join(sorted(op.name for op in valid))
            raise click.BadParameter(f"{rtype.name} only supports operations {names}", param_hint="--operation")


def _resource_options(func: Any) -> Any:
    options = [
        click.option("--topic", multiple=True, help="a topic (repeatable; * = every topic)"),
        click.option("--group", multiple=True, help="a consumer group (repeatable)"),
        click.option("--transactional-id", multiple=True, help="a transactional id (repeatable)"),
        click.option("--cluster", is_flag=True, help="the cluster (kafka-cluster)"),
        click.option("--delegation-token", multiple=True, help="a delegation token (repeatable)"),
        click.option("--allow-principal", multiple=True, metavar="TYPE:NAME", help="allowed principal (repeatable)"),
        click.option("--deny-principal", multiple=True, metavar="TYPE:NAME", help="denied principal (repeatable)"),
        click.option("--allow-host", multiple=True, help="host the allowed principals may connect from [default *]"),
        click.option("--deny-host", multiple=True, help="host the denied principals are denied from [default *]"),
        click.option("--operation", multiple=True, callback=_operations,
                     help=f"operation (repeatable): {_KAFKA_NAMES}"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _pattern_option(choices: Sequence[str]) -> Callable[[F], F]:
    return click.option(
        "--resource-pattern-type", "pattern", default="LITERAL", show_default=True,
        type=click.Choice(list(choices), case_sensitive=False),
        help="LITERAL or PREFIXED; to list or delete also ANY (exact name, any pattern) and "
        "MATCH (every ACL that applies to the resource)",
    )


@click.group(help=f"Create, list or delete ACLs (kafka-acls.sh). {KAFKA_COMPATIBLE}")
def acls() -> None:
    pass


_O = AclOperation
#: kafka-acls.sh's --producer and --consumer: the operations each resource type needs
_PRODUCER = {ResourceType.TOPIC: (_O.WRITE, _O.DESCRIBE, _O.CREATE),
             ResourceType.TRANSACTIONAL_ID: (_O.WRITE, _O.DESCRIBE)}
_CONSUMER = {ResourceType.TOPIC: (_O.READ, _O.DESCRIBE), ResourceType.GROUP: (_O.READ,)}


def _operations_by_resource(
    resources: Sequence[tuple[ResourceType, str]], operation: Sequence[AclOperation], producer: bool, consumer: bool,
) -> list[tuple[tuple[ResourceType, str], AclOperation]]:
    """(resource, operation) pairs: --operation (default ALL) on every resource, or what
    --producer / --consumer give each resource type (kafka-acls.sh's rules)."""
    types = {rtype for rtype, _ in resources}
    if not producer and not consumer:
        operations = list(operation) or [AclOperation.ALL]
        _check_operations(resources, operations)
        return [(r, op) for r in resources for op in operations]
    if ResourceType.TOPIC not in types or (consumer and ResourceType.GROUP not in types):
        raise click.UsageError("--producer needs --topic; --consumer needs --topic and --group")
    if operation or types - {ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID}:
        raise click.UsageError("--producer / --consumer take --topic, --group and "
                               "--transactional-id only, and no --operation")
    pairs: dict[tuple[tuple[ResourceType, str], AclOperation], None] = {}
    for table in [t for t, wanted in ((_PRODUCER, producer), (_CONSUMER, consumer)) if wanted]:
        for resource in resources:
            pairs.update(((resource, op), None) for op in table.get(resource[0], ()))
    return list(pairs)


@acls.command()
@_resource_options
@click.option("--producer", is_flag=True, help="what a producer needs: WRITE, DESCRIBE, CREATE on "
              "the topics (WRITE, DESCRIBE on --transactional-id)")
@click.option("--consumer", is_flag=True, help="what a consumer needs: READ, DESCRIBE on the topics, "
              "READ on the --group")
@_pattern_option(["LITERAL", "PREFIXED"])
@client_options
def create(settings: ClientSettings, topic: tuple[str, ...], group: tuple[str, ...],
           transactional_id: tuple[str, ...], cluster: bool, delegation_token: tuple[str, ...],
           allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
           allow_host: tuple[str, ...], deny_host: tuple[str, ...], operation: list[AclOperation],
           producer: bool, consumer: bool, pattern: str) -> int:
    """Add ACLs: every resource x principal x host x operation given (default operation ALL)."""
    resources = _resources(topic, group, transactional_id, cluster, delegation_token)
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not resources or not entries:
        raise click.UsageError("name a resource (--topic, --group, --cluster, ...) and "
                               "--allow-principal or --deny-principal")
    _check_principals([*allow_principal, *deny_principal])
    creations = [
        CreateAclsRequest_AclCreation(
            resource_type=rtype, resource_name=name, resource_pattern_type=PatternType[pattern.upper()],
            principal=principal, host=host, operation=op, permission_type=permission,
        )
        for ((rtype, name), op), (principal, host, permission) in itertools.product(
            _operations_by_resource(resources, operation, producer, consumer), entries
        )
    ]
    with Admin(settings) as admin:
        response: CreateAclsResponse = admin.call(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=creations))
    made = [_row(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                 c.operation, c.permission_type) for c in creations]
    for c, r in zip(made, response.results, strict=True):
        check(r.error_code, f"creating the ACL {c['permission']} {c['principal']} {c['operation']} on "
              f"{c['resource_type']} {c['name']}", r.error_message)
    out = Output(settings)
    if settings.json:
        out.emit(made)
    else:
        out.line(f"created {len(made)} ACL{'s' if len(made) != 1 else ''}")
    return 0


@acls.command(name="list")
@click.option("--topic", multiple=True, help="a topic (repeatable)")
@click.option("--group", multiple=True, help="a consumer group (repeatable)")
@click.option("--transactional-id", multiple=True, help="a transactional id (repeatable)")
@click.option("--cluster", is_flag=True, help="the cluster (kafka-cluster)")
@click.option("--delegation-token", multiple=True, help="a delegation token (repeatable)")
@click.option("--principal", help="only the ACLs of this principal")
@_pattern_option(["ANY", "MATCH", "LITERAL", "PREFIXED"])
@client_options
def list_acls(settings: ClientSettings, topic: tuple[str, ...], group: tuple[str, ...],
              transactional_id: tuple[str, ...], cluster: bool, delegation_token: tuple[str, ...],
              principal: str | None, pattern: str) -> int:
    """List ACLs: all of them, or those of the named resources (and principal)."""
    resources: list[tuple[ResourceType, str | None]] = list(
        _resources(topic, group, transactional_id, cluster, delegation_token)
    )
    pattern_type = PatternType[pattern.upper()]
    if not resources:
        resources, pattern_type = [(ResourceType.ANY, None)], PatternType.ANY
    rows: list[dict[str, Any]] = []
    with Admin(settings) as admin:
        for rtype, name in resources:
            request = DescribeAclsRequest(
                resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern_type,
                principal_filter=principal, host_filter=None, operation=AclOperation.ANY,
                permission_type=AclPermissionType.ANY,
            )
            response: DescribeAclsResponse = admin.call(ApiKey.DESCRIBE_ACLS, request)
            check(response.error_code, "listing ACLs", response.error_message)
            rows += [_row(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host,
                          a.operation, a.permission_type)
                     for r in response.resources for a in r.acls]
    unique = list({tuple(r.values()): r for r in rows}.values())
    Output(settings).records(_COLUMNS, unique)
    return 0


@acls.command()
@_resource_options
@_pattern_option(["ANY", "MATCH", "LITERAL", "PREFIXED"])
@client_options
def delete(settings: ClientSettings, topic: tuple[str, ...], group: tuple[str, ...],
           transactional_id: tuple[str, ...], cluster: bool, delegation_token: tuple[str, ...],
           allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
           allow_host: tuple[str, ...], deny_host: tuple[str, ...], operation: list[AclOperation],
           pattern: str) -> int:
    """Remove the ACLs of the named resources (only the given principals, hosts and
    operations' when named) and print what was removed."""
    resources = _resources(topic, group, transactional_id, cluster, delegation_token)
    if not resources:
        raise click.UsageError("name a resource (--topic, --group, --cluster, ...)")
    _check_principals([*allow_principal, *deny_principal])
    entries: list[tuple[str | None, str | None, AclPermissionType]] = list(
        _entries(allow_principal, deny_principal, allow_host, deny_host)
    ) or [(None, None, AclPermissionType.ANY)]
    operations = list(operation) or [AclOperation.ANY]
    filters = [
        DeleteAclsRequest_DeleteAclsFilter(
            resource_type_filter=rtype, resource_name_filter=name,
            pattern_type_filter=PatternType[pattern.upper()], principal_filter=principal,
            host_filter=host, operation=op, permission_type=permission,
        )
        for (rtype, name), (principal, host, permission), op in itertools.product(resources, entries, operations)
    ]
    with Admin(settings) as admin:
        response: DeleteAclsResponse = admin.call(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=filters))
    rows: list[dict[str, Any]] = []
    for r in response.filter_results:
        check(r.error_code, "deleting ACLs", r.error_message)
        for m in r.matching_acls:
            if m.error_code != ErrorCode.NONE:
                raise CliError(f"deleting the ACLs of {m.resource_name}", m.error_code)
            rows.append(_row(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                             m.operation, m.permission_type))
    unique = list({tuple(r.values()): r for r in rows}.values())
    out = Output(settings)
    if settings.json:
        out.emit(unique)
    else:
        out.records(_COLUMNS, unique, title=f"deleted {len(unique)} ACL{'s' if len(unique) != 1 else ''}")
    return 0
