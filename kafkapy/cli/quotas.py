"""`kafkapy quotas describe|alter`: client quotas (kafka-configs.sh --entity-type users/clients).

The entity is named as kafka-configs.sh names it: `--user NAME` or `--user-defaults` (Kafka's
`--entity-default`), `--client-id ID` or `--client-defaults`, one or both (a user and a client id
together is the user's quota for that client). `alter --add-config producer_byte_rate=1048576,
consumer_byte_rate=...` sets keys and `--delete-config KEY` removes them (others untouched);
keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage (percent of one
request thread), controller_mutation_rate (partitions/s).

What is sent: DescribeClientQuotas / AlterClientQuotas, as Kafka's admin client sends them.
`describe` without an entity lists every quota; with one it shows that entity exactly (a strict
filter); `--match-all` with `--user`/`--client-id` widens it to every entity that includes them.

Exit codes: 0 ok, 1 a refusal from the cluster (named with its Kafka error code), 2 a usage
error.
"""

from __future__ import annotations

from typing import Any

import click

from kafkapy.cli.common import KAFKA_COMPATIBLE, ClientSettings, CliError, Output, client_options
from kafkapy.cli.configs import split_configs
from kafkapy.cli.wire import Admin
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

__all__ = ["alter_quotas", "describe_quotas", "quotas"]

USER, CLIENT_ID = "user", "client-id"
EXACT, DEFAULT = 0, 1
DEFAULT_NAME = "<default>"
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
Entity = list[tuple[str, str | None]]


def _check(code: int, what: str, message: str | None) -> None:
    if code != ErrorCode.NONE:
        hint = "keys: " + ", ".join(KEYS) + "; values > 0" if code == ErrorCode.INVALID_REQUEST else None
        raise CliError(f"{what}{f' ({message})' if message else ''}", code, hint)


def _label(entity: Entity) -> str:
    """`user=alice, client-id=<default>` (the user first, as kafka-configs.sh prints it)."""
    ordered = sorted(entity, key=lambda pair: pair[0] != USER)
    return ", ".join(f"{t}={DEFAULT_NAME if n is None else n}" for t, n in ordered)


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def describe_quotas(admin: Admin, entity: Entity, *, strict: bool) -> list[dict[str, Any]]:
    """[{entity: {type: name or None}, quotas: {key: value}}] matching the filter."""
    request = DescribeClientQuotasRequest(
        components=[
            DescribeClientQuotasRequest.ComponentData(
                entity_type=t, match_type=DEFAULT if n is None else EXACT, match=n
            )
            for t, n in entity
        ],
        strict=strict,
    )
    response: DescribeClientQuotasResponse = admin.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, request)
    _check(response.error_code, "describing quotas", response.error_message)
    found = [
        {
            "entity": {e.entity_type: e.entity_name for e in item.entity},
            "quotas": {v.key: v.value for v in item.values},
        }
        for item in response.entries or []
    ]
    return sorted(found, key=lambda f: sorted((k, v or "") for k, v in f["entity"].items()))


def alter_quotas(
    admin: Admin,
    entity: Entity,
    add: dict[str, float],
    delete: list[str],
    *,
    validate_only: bool = False,
) -> None:
    """Set `add` and remove `delete` on one entity (AlterClientQuotas)."""
    ops = [AlterClientQuotasRequest.OpData(key=k, value=v, remove=False) for k, v in add.items()]
    ops += [AlterClientQuotasRequest.OpData(key=k, value=0.0, remove=True) for k in delete]
    request = AlterClientQuotasRequest(
        entries=[
            AlterClientQuotasRequest.EntryData(
                entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=ops,
            )
        ],
        validate_only=validate_only,
    )
    response: AlterClientQuotasResponse = admin.call(ApiKey.ALTER_CLIENT_QUOTAS, request)
    for r in response.entries:
        _check(r.error_code, f"quotas of {_label(entity)}", r.error_message)


def _entity(user: str | None, user_defaults: bool, client_id: str | None, client_defaults: bool) -> Entity:
    if user is not None and user_defaults:
        raise click.UsageError("give --user or --user-defaults, not both")
    if client_id is not None and client_defaults:
        raise click.UsageError("give --client-id or --client-defaults, not both")
    entity: Entity = []
    if user is not None or user_defaults:
        entity.append((USER, user))
    if client_id is not None or client_defaults:
        entity.append((CLIENT_ID, client_id))
    return entity


def _values(items: tuple[str, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in split_configs(items):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"needs KEY=VALUE, got {item!r}", param_hint="--add-config")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(f"{key.strip()} needs a number, got {value!r}", param_hint="--add-config") from None
    return out


def _entity_options(func: Any) -> Any:
    for option in reversed([
        click.option("--user", help="a user (principal name without `User:`)"),
        click.option("--user-defaults", is_flag=True, help="the default user (Kafka's --entity-default)"),
        click.option("--client-id", help="a client id"),
        click.option("--client-defaults", is_flag=True, help="the default client id"),
    ]):
        func = option(func)
    return func


@click.group(help=f"Describe or alter client quotas (kafka-configs.sh --entity-type users/clients). {KAFKA_COMPATIBLE}")
def quotas() -> None:
    pass


@quotas.command()
@_entity_options
@click.option("--match-all", is_flag=True, help="also entities that include the given user / client id")
@client_options
def describe(
    settings: ClientSettings,
    user: str | None,
    user_defaults: bool,
    client_id: str | None,
    client_defaults: bool,
    match_all: bool,
) -> int:
    """Show client quotas (every one, or one entity's)."""
    entity = _entity(user, user_defaults, client_id, client_defaults)
    with Admin(settings) as admin:
        found = describe_quotas(admin, entity, strict=bool(entity) and not match_all)
    out = Output(settings)
    if settings.json:
        out.emit(found)
    else:
        rows = [
            (_label(list(f["entity"].items())), key, _number(value))
            for f in found
            for key, value in sorted(f["quotas"].items())
        ]
        out.table(["ENTITY", "QUOTA", "VALUE"], rows)
    return 0


@quotas.command()
@_entity_options
@click.option("--add-config", "add", multiple=True, help="KEY=VALUE[,KEY=VALUE...] to set")
@click.option("--delete-config", "delete", multiple=True, help="KEY[,KEY...] to remove")
@click.option("--validate-only", is_flag=True, help="let the cluster check the change, store nothing")
@client_options
def alter(
    settings: ClientSettings,
    user: str | None,
    user_defaults: bool,
    client_id: str | None,
    client_defaults: bool,
    add: tuple[str, ...],
    delete: tuple[str, ...],
    validate_only: bool,
) -> int:
    """Set or remove client quotas of one entity."""
    entity = _entity(user, user_defaults, client_id, client_defaults)
    if not entity:
        raise click.UsageError("name an entity: --user/--user-defaults and/or --client-id/--client-defaults")
    values = _values(add)
    removed = split_configs(delete)
    if not values and not removed:
        raise click.UsageError("nothing to change: give --add-config and/or --delete-config")
    with Admin(settings) as admin:
        alter_quotas(admin, entity, values, removed, validate_only=validate_only)
    out = Output(settings)
    if settings.json:
        out.emit({"entity": dict(entity), "set": values, "deleted": removed, "validate_only": validate_only})
    else:
        verb = "checked (nothing stored)" if validate_only else "altered"
        out.line(f"{verb} quotas of {_label(entity)}")
    return 0
