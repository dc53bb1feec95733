"""`kafkapy configs describe|alter` for topics, brokers, broker loggers and groups (kafka-configs.sh).

Brokers have Kafka's two dynamic levels: one broker (`--broker ID`: DescribeConfigs and
IncrementalAlterConfigs go to that broker, as Kafka's admin client sends them) and the cluster
default (`--broker-defaults`: resource name "", any broker, which forwards to the controller).
A broker's log levels (`--broker-logger ID`, Kafka's `--entity-type broker-loggers`) go to that
broker: `describe` lists its loggers, `alter --add-config kafkapy.server.broker=DEBUG` sets one
and `--delete-config` makes it follow its parent again.
`describe` shows what was set (not Kafka's built-in defaults) unless `--all`, with each value's
source. The CLI only sends the requests; what a broker refuses is shown with its error code.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    Output,
    check,
    client_options,
    parse_key_values,
)
from kafkapy.cli.wire import Admin, KafkaWireClient
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

__all__ = ["BROKER", "GROUP", "TOPIC", "alter_configs", "configs", "describe_configs", "describe_topic_configs",
           "split_configs"]

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE = 0, 1
SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG",
}
DEFAULT_CONFIG = 5
_KIND = {TOPIC: "topic", BROKER: "broker", BROKER_LOGGER: "broker logger", GROUP: "group"}


def _target(admin: Admin, resource_type: int, name: str) -> KafkaWireClient:
    """Where Kafka's admin client sends a config request for this resource."""
    if resource_type in (BROKER, BROKER_LOGGER) and name:
        try:
            return admin.broker(int(name))
        except ValueError:
            raise click.BadParameter(f"a broker is named by its node id, got {name!r}") from None
    return admin.bootstrap


def describe_configs(
    admin: Admin, resource_type: int, name: str, keys: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Every config of one resource: name, value, source, sensitive, read-only, synonyms."""
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configuration_keys=None if keys is None else list(keys),
            )
        ],
        include_synonyms=True,
    )
    response: DescribeConfigsResponse = _target(admin, resource_type, name).call(
        ApiKey.DESCRIBE_CONFIGS, request
    )
    result = response.results[0]
    label = f"{_KIND.get(resource_type, 'resource')} {name or '(cluster default)'}"
    check(result.error_code, label, result.error_message)
    return _rows(result)


def describe_topic_configs(admin: Admin, names: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Every config of many topics in one DescribeConfigs (a topic deleted meanwhile: none)."""
    request = DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC, resource_name=name)
                   for name in names],
        include_synonyms=True,
    )
    if not request.resources:
        return {}
    response: DescribeConfigsResponse = admin.call(ApiKey.DESCRIBE_CONFIGS, request)
    found = {}
    for result in response.results:
        if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            continue
        check(result.error_code, f"topic {result.resource_name}", result.error_message)
        found[str(result.resource_name)] = _rows(result)
    return found


def _rows(result: Any) -> list[dict[str, Any]]:
    return [
        {
            "name": c.name,
            "value": None if c.is_sensitive else c.value,
            "source": SOURCES.get(c.config_source, str(c.config_source)),
            "sensitive": c.is_sensitive,
            "read_only": c.read_only,
            "synonyms": [
                {"name": s.name, "value": s.value, "source": SOURCES.get(s.source, str(s.source))}
                for s in c.synonyms
            ],
        }
        for c in sorted(result.configs, key=lambda c: c.name)
    ]


def alter_configs(
    admin: Admin,
    resource_type: int,
    name: str,
    add: Mapping[str, str],
    delete: Iterable[str] = (),
    validate_only: bool = False,
) -> None:
    """Set `add` and remove `delete` with IncrementalAlterConfigs (other keys untouched)."""
    changes = [
        IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=SET, value=v)
        for k, v in add.items()
    ] + [
        IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=DELETE, value=None)
        for k in delete
    ]
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=changes
            )
        ],
        validate_only=validate_only,
    )
    response: IncrementalAlterConfigsResponse = _target(admin, resource_type, name).call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, request
    )
    for r in response.responses:
        label = f"altering {_KIND.get(resource_type, 'resource')} {name or '(cluster default)'}"
        check(r.error_code, label, r.error_message)


def _resource(topic: str | None, broker: str | None, broker_defaults: bool, group: str | None,
              broker_logger: str | None) -> tuple[int, str]:
    chosen = [(TOPIC, topic), (BROKER, broker), (GROUP, group), (BROKER_LOGGER, broker_logger)]
    given = [(t, n) for t, n in chosen if n is not None]
    if broker_defaults:
        given.append((BROKER, ""))
    if len(given) != 1:
        raise click.UsageError(
            "name one of --topic, --broker, --broker-defaults, --group, --broker-logger")
    resource_type, name = given[0][0], str(given[0][1])
    if not name.strip() and not (resource_type == BROKER and broker_defaults):
        flag = {TOPIC: "--topic", BROKER: "--broker", GROUP: "--group", BROKER_LOGGER: "--broker-logger"}
        hint = " (the cluster-wide broker defaults are --broker-defaults)" if resource_type == BROKER else ""
        raise click.UsageError(f"{flag[resource_type]} needs a non-empty name{hint}")
    return resource_type, name


# kafka-configs.sh's --entity-type, as the flag kafkapy names the entity with
_ENTITY_FLAGS = {"topics": "topic", "brokers": "broker", "groups": "group", "broker-loggers": "broker_logger"}
_ELSEWHERE = {"users": "kafkapy users (SCRAM) or kafkapy quotas --user",
              "clients": "kafkapy quotas --client-id", "ips": "(ip quotas: not supported)",
              "client-metrics": "(client metrics: not supported)"}


def _from_entity(kwargs: dict[str, Any]) -> None:
    """Turn `--entity-type T --entity-name N | --entity-default` into kafkapy's own flag."""
    entity_type, name, default = (kwargs.pop("entity_type"), kwargs.pop("entity_name"),
                                  kwargs.pop("entity_default"))
    if entity_type is None:
        if name is not None or default:
            raise click.UsageError("--entity-name and --entity-default go with --entity-type")
        return
    if entity_type in _ELSEWHERE:
        raise click.UsageError(f"--entity-type {entity_type}: see {_ELSEWHERE[entity_type]}")
    if (name is None) == (not default):
        raise click.UsageError("--entity-type needs --entity-name NAME or --entity-default")
    if default:
        if entity_type != "brokers":
            raise click.UsageError(f"--entity-default: {entity_type} have no default entity")
        if kwargs["broker_defaults"]:
            _twice("--broker-defaults")
        kwargs["broker_defaults"] = True
        return
    flag = _ENTITY_FLAGS[entity_type]
    if kwargs[flag] is not None:
        _twice(f"--{flag.replace('_', '-')}")
    kwargs[flag] = name


def _twice(flag: str) -> NoReturn:
    raise click.UsageError(f"{flag} and --entity-type name the same thing: give one")


def _entity_options(func: Any) -> Any:
    @functools.wraps(func)
    def from_entity(*args: Any, **kwargs: Any) -> Any:
        _from_entity(kwargs)
        return func(*args, **kwargs)

    for option in reversed([
        click.option("--topic", help="a topic"),
        click.option("--broker", metavar="ID", help="one broker's dynamic configs (node id)"),
        click.option("--broker-defaults", is_flag=True, help="the cluster-wide broker defaults"),
        click.option("--group", help="a consumer group (consumer.* group configs, KIP-848)"),
        click.option("--broker-logger", metavar="ID",
                     help="one broker's log levels (logger=LEVEL; kafka-configs' broker-loggers)"),
        click.option("--entity-type", type=click.Choice([*_ENTITY_FLAGS, *_ELSEWHERE]),
                     help="kafka-configs.sh's spelling: with --entity-name or --entity-default"),
        click.option("--entity-name", metavar="NAME", help="the entity of --entity-type"),
        click.option("--entity-default", is_flag=True, help="--entity-type brokers: the cluster default"),
    ]):
        from_entity = option(from_entity)
    return from_entity


@click.group(help=f"Describe or alter topic, broker and group configs (kafka-configs.sh). {KAFKA_COMPATIBLE}")
def configs() -> None:
    pass


@configs.command()
@_entity_options
@click.option("--all", "show_all", is_flag=True, help="also the defaults nobody set")
@client_options
def describe(
    settings: ClientSettings, topic: str | None, broker: str | None, broker_defaults: bool,
    group: str | None, broker_logger: str | None, show_all: bool,
) -> int:
    """Show the configs set on a topic, a broker, the broker defaults or a group."""
    resource_type, name = _resource(topic, broker, broker_defaults, group, broker_logger)
    with Admin(settings) as admin:
        items = describe_configs(admin, resource_type, name)
    if not show_all:
        items = [i for i in items if i["source"] != SOURCES[DEFAULT_CONFIG]]
    shown = [{**i, "value": "(sensitive)" if i["sensitive"] else i["value"]} for i in items]
    out = Output(settings)
    if settings.json:
        out.emit(items)
    elif not shown:
        out.line(f"no configs set on {_KIND[resource_type]} {name or '(cluster default)'}"
                 f"{'' if show_all else ' (--all lists the defaults)'}")
    else:
        out.records([("name", "NAME"), ("value", "VALUE"), ("source", "SOURCE"),
                     ("read_only", "READ-ONLY")], shown)
    return 0


def split_configs(items: Iterable[str]) -> list[str]:
    """Kafka's `k=v,k2=v2` (and repeated flags); `[a,b]` keeps a list value together."""
    out: list[str] = []
    for item in items:
        depth, start = 0, 0
        for i, ch in enumerate(item):
            depth += ch == "["
            depth -= ch == "]"
            if ch == "," and depth == 0:
                out.append(item[start:i])
                start = i + 1
        out.append(item[start:])
    return [o.strip() for o in out if o.strip()]


@configs.command()
@_entity_options
@click.option("--add-config", multiple=True, metavar="K=V[,K=V]", help="set configs (repeatable)")
@click.option("--delete-config", multiple=True, metavar="K[,K]", help="remove configs (repeatable)")
@click.option("--validate-only", is_flag=True, help="let the broker check, change nothing")
@client_options
def alter(
    settings: ClientSettings, topic: str | None, broker: str | None, broker_defaults: bool,
    group: str | None, broker_logger: str | None, add_config: tuple[str, ...], delete_config: tuple[str, ...], validate_only: bool,
) -> int:
    """Set or remove configs of a topic, a broker, the broker defaults or a group."""
    resource_type, name = _resource(topic, broker, broker_defaults, group, broker_logger)
    add = {k: v.strip("[]") if v.startswith("[") else v
           for k, v in parse_key_values(split_configs(add_config), "--add-config").items()}
    delete = split_configs(delete_config)
    if not add and not delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    with Admin(settings) as admin:
        alter_configs(admin, resource_type, name, add, delete, validate_only)
    out = Output(settings)
    what = f"{_KIND[resource_type]} {name or '(cluster default)'}"
    if settings.json:
        out.emit({"resource": what, "set": add, "deleted": delete, "validate_only": validate_only})
    else:
        out.line(f"{'validated' if validate_only else 'altered'} configs of {what}")
    return 0

