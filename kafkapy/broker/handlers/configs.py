"""Configs: DescribeConfigs (key 32) v0-4, AlterConfigs (key 33) v0-2,
IncrementalAlterConfigs (key 44) v0-1.

Behaviour:
- Describe a TOPIC: every topic config with its effective value and source - the topic's own
  override (DYNAMIC_TOPIC_CONFIG), else the broker key that supplies the default
  (STATIC_BROKER_CONFIG when set in server.properties/env/flags, DEFAULT_CONFIG otherwise) - and,
  when asked, the synonyms in precedence order (as Kafka lists them), types and docs (v3+).
  Unknown topic -> UNKNOWN_TOPIC_OR_PARTITION. `configuration_keys` filters.
- Describe a BROKER (resource name = our node id): every broker key kafkapy knows with its
  effective value, source and synonyms (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
  STATIC_BROKER_CONFIG, DEFAULT_CONFIG, in Kafka's order); the dynamic ones are writable. ""
  lists the dynamic cluster defaults only.
- BROKER_LOGGER (resource name = our node id): describe lists `root` and kafkapy's loggers with
  their levels; IncrementalAlterConfigs SETs or DELETEs levels (`broker_loggers`), answered by
  this node in a cluster too; AlterConfigs does not take them (INVALID_REQUEST), as in Kafka.
- GROUP resources (KIP-848 group configs, resource type 32; the group need not exist):
  describe lists `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` with the
  group's value (DYNAMIC_GROUP_CONFIG) or the broker's `group.consumer.*` default; alters are
  checked against the broker's `group.consumer.min/max.*` bounds (INVALID_CONFIG), stored with
  the metadata and applied by the group coordinator from
  each member's next heartbeat. An empty group id is INVALID_REQUEST. Kafka 4.0's `share.*`
  configs are stored, described and checked (`group.share.*` bounds) as Kafka does; kafkapy has
  no share groups to apply them to.
- Alters (every resource type but BROKER_LOGGER) go to the active controller (in-process on a
  quorum of one) as IncrementalAlterConfigs: AlterConfigs, which replaces a resource's whole
  override set, becomes SET for every given name and DELETE for every other name an override
  can have; IncrementalAlterConfigs' SET / DELETE / APPEND / SUBTRACT (the last two on list
  configs, e.g. `log.cleanup.policy`) go as they are. The controller validates
  (`config_rules`: unknown keys and bad values INVALID_CONFIG - on a BROKER resource
  INVALID_REQUEST, as Kafka answers there - another broker id or an empty group id
  INVALID_REQUEST) and commits them; every broker applies them from the metadata image
  (partition logs at once: retention, segment size, cleanup policy, max message bytes,
  timestamp type; dynamic broker configs re-derive the default log config; group configs reach
  the coordinators), and the answer comes once this broker's image has them. BROKER resources
  ("" or a broker id) accept the dynamic configs the controller acts on
  (`unclean.leader.election.enable`, `min.insync.replicas`) and the brokers' dynamic keys.
  `validate_only` checks only.

Authorization (an authorizer configured; Kafka's checks per resource): describing needs
DESCRIBE_CONFIGS, altering ALTER_CONFIGS - on the topic (TOPIC_AUTHORIZATION_FAILED), the group
(GROUP_AUTHORIZATION_FAILED) or, for BROKER and BROKER_LOGGER resources, the cluster
(CLUSTER_AUTHORIZATION_FAILED); refused resources are not forwarded.

Password-typed broker keys (SASL users, JAAS) are described with no value and
`is_sensitive=True`, as Kafka does.

Not yet: client quotas, CLIENT_METRICS resources.

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): IncrementalAlterConfigs (44) v0-1.
"""

from __future__ import annotations

from collections.abc import Iterator

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.broker_loggers import LoggerChange, LoggerError, alter_loggers, logger_levels
from kafkapy.broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
)
from kafkapy.broker.config_rules import DYNAMIC_BROKER_KEYS
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.config_entries import broker_synonyms, topic_config_entries
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.controller.configs import DYNAMIC_BROKER_CONFIGS
from kafkapy.controller.controller import (
    ConfigChange,
    ConfigOp,
)
from kafkapy.coordinator.group import GROUP_CONFIGS
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkapy.protocol.messages.describe_configs import (
    DescribeConfigsResponse_DescribeConfigsResourceResult as Entry,
)
from kafkapy.protocol.messages.describe_configs import (
    DescribeConfigsResponse_DescribeConfigsSynonym as Synonym,
)
from kafkapy.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest_AlterableConfig as AlterableConfig,
)
from kafkapy.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest_AlterConfigsResource as AlterConfigsResource,
)
from kafkapy.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsResponse_AlterConfigsResourceResponse as AlterConfigsResourceResponse,
)

__all__ = [
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
]

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _broker_entries(ports: RequestPorts, resource: str, keys: list[str] | None, include_synonyms: bool,
                    include_doc: bool) -> list[Entry]:
    """A broker id: every key with its effective value, source and synonyms (dynamic keys
    writable). "" (the cluster default): only the dynamic cluster defaults, as Kafka lists."""
    entries: list[Entry] = []
    for name, value, source in ports.config.items():
        if keys is not None and name not in keys:
            continue
        key = BROKER_CONFIGS[name]
        sensitive = key.type == ConfigType.PASSWORD  # Kafka hides them; the value is None
        synonyms = [] if sensitive else broker_synonyms(ports, [name])
        if resource == "":
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            if not synonyms:
                continue
            value, source = synonyms[0].value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        entries.append(
            Entry(
                name=name,
                value=value,
                read_only=name not in DYNAMIC_BROKER_KEYS,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=sensitive,
                synonyms=synonyms if include_synonyms else [],
                config_type=key.type,
                documentation=key.doc if include_doc else None,
            )
        )
    return entries


def _group_entries(ports: RequestPorts, group_id: str, keys: list[str] | None, include_synonyms: bool,
                   include_doc: bool) -> list[Entry]:
    """Every group config: the group's own value, else the broker key it defaults to."""
    own = ports.config.group_configs.get(group_id, {})
    entries: list[Entry] = []
    for name, key in GROUP_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        synonyms = broker_synonyms(ports, [key.broker_default]) if key.broker_default else []
        value: str | None = own.get(name)
        source = ConfigSource.DYNAMIC_GROUP_CONFIG
        if value is not None:
            synonyms.insert(0, Synonym(name=name, value=value, source=source))
        else:
            source = ConfigSource.DEFAULT_CONFIG
            value = ports.config.get(key.broker_default) if key.broker_default else key.default
        entries.append(Entry(
            name=name, value=value, read_only=False, is_default=source == ConfigSource.DEFAULT_CONFIG,
            config_source=source, is_sensitive=False, synonyms=synonyms if include_synonyms else [],
            config_type=key.type, documentation=key.doc if include_doc else None,
        ))
    return entries


def _refusal(ctx: RequestContext, resource_type: int, name: str, operation: AclOperation) -> ErrorCode | None:
    """The authorization error for this config resource, or None when allowed."""
    if resource_type == TOPIC:
        allowed, code = ctx.authorize(operation, ResourceType.TOPIC, name), ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif resource_type == GROUP:
        allowed, code = ctx.authorize(operation, ResourceType.GROUP, name), ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif resource_type in (BROKER, BROKER_LOGGER):
        allowed, code = ctx.authorize_cluster(operation), ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        return None  # answered INVALID_REQUEST by the resource's own check
    return None if allowed else code


def _is_this_broker(ports: RequestPorts, name: str) -> bool:
    return name == "" or name == str(ports.local.node_id)


@handler(ApiKey.DESCRIBE_CONFIGS, min_version=0, max_version=4)
async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    ports = ctx.ports
    response = DescribeConfigsResponse()
    synonyms = ctx.api_version >= 1 and req.include_synonyms
    docs = ctx.api_version >= 3 and req.include_documentation
    for res in req.resources:
        result = DescribeConfigsResponse.DescribeConfigsResult(
            resource_type=res.resource_type, resource_name=res.resource_name
        )
        response.results.append(result)
        keys = res.configuration_keys
        refused = _refusal(ctx, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
        if refused is not None:
            result.error_code = refused
            continue
        if res.resource_type == TOPIC:
            info = ports.topics.get(res.resource_name)
            if info is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"Topic {res.resource_name} does not exist"
                continue
            result.configs = topic_config_entries(ports, info, include_synonyms=synonyms, keys=keys, include_documentation=docs)
        elif res.resource_type == BROKER:
            if not _is_this_broker(ports, res.resource_name):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Unexpected broker id, expected {ports.local.node_id} or empty string"
                continue
            result.configs = _broker_entries(ports, res.resource_name, keys, synonyms, docs)
        elif res.resource_type == BROKER_LOGGER:
            if res.resource_name != str(ports.local.node_id):
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = f"Unexpected broker id, expected {ports.local.node_id}"
                continue
            result.configs = _logger_entries(keys)
        elif res.resource_type == GROUP:
            if not res.resource_name:
                result.error_code = ErrorCode.INVALID_REQUEST
                result.error_message = "The group id must not be empty"
                continue
            result.configs = _group_entries(ports, res.resource_name, keys, synonyms, docs)
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"Unsupported resource type {res.resource_type}"
    return response


def _logger_entries(keys: list[str] | None) -> list[Entry]:
    return [
        Entry(name=name, value=level, read_only=False, is_default=False,
              config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, is_sensitive=False,
              synonyms=[], config_type=ConfigType.STRING)
        for name, level in logger_levels(keys)
    ]


def _alter_loggers(ports: RequestPorts, res: AlterConfigsResource,
                   validate_only: bool) -> tuple[ErrorCode, str | None]:
    """Log levels are this node's own: answered here, in a cluster too (Kafka's broker does)."""
    if res.resource_name != str(ports.local.node_id):
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ports.local.node_id}"
    try:
        alter_loggers([LoggerChange(c.name, c.config_operation, c.value) for c in res.configs],
                      validate_only=validate_only)
    except LoggerError as e:
        return e.error, e.message
    return ErrorCode.NONE, None


@handler(ApiKey.ALTER_CONFIGS, min_version=0, max_version=2)
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    """AlterConfigs (replace the whole override set) as an IncrementalAlterConfigs."""
    forward = IncrementalAlterConfigsRequest(validate_only=req.validate_only)
    duplicates: set[int] = set()
    refused: dict[int, ErrorCode] = {}
    for i, res in enumerate(req.resources):
        refusal = _refusal(ctx, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
        if refusal is not None:
            refused[i] = refusal
            continue
        given = {c.name: c.value for c in res.configs}
        if len(given) != len(res.configs):
            duplicates.add(i)
            continue
        ops = [AlterableConfig(name=k, config_operation=SET if v is not None else DELETE, value=v) for k, v in given.items()]
        ops += [
            AlterableConfig(name=k, config_operation=DELETE, value=None)
            for k in sorted(_replaceable(res.resource_type) | _current_overrides(ctx, res.resource_type, res.resource_name).keys())
            if k not in given
        ]
        forward.resources.append(IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=res.resource_type, resource_name=res.resource_name, configs=ops,
        ))
    answers = iter((await _forward_incremental(ctx, forward)).responses) if forward.resources else iter(())
    response = AlterConfigsResponse()
    for i, res in enumerate(req.resources):
        code: ErrorCode
        message: str | None
        if i in refused:
            code, message = refused[i], None
        elif i in duplicates:
            code, message = ErrorCode.INVALID_REQUEST, "Duplicate config name"
        else:
            answer = next(answers)
            code, message = ErrorCode(answer.error_code), answer.error_message
        response.responses.append(AlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message,
            resource_type=res.resource_type, resource_name=res.resource_name,
        ))
    return response


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, min_version=0, max_version=1)
async def handle_incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    ports = ctx.ports
    refused = {
        i: refusal for i, r in enumerate(req.resources)
        if (refusal := _refusal(ctx, r.resource_type, r.resource_name, AclOperation.ALTER_CONFIGS)) is not None
    }
    forward = [r for i, r in enumerate(req.resources) if r.resource_type != BROKER_LOGGER and i not in refused]
    forwarded: Iterator[AlterConfigsResourceResponse] = iter(())
    if forward:
        answer = await _forward_incremental(ctx, IncrementalAlterConfigsRequest(resources=forward, validate_only=req.validate_only))
        forwarded = iter(answer.responses)
    response = IncrementalAlterConfigsResponse()
    for i, res in enumerate(req.resources):
        code: ErrorCode
        message: str | None
        if i in refused:
            code, message = refused[i], None
        elif res.resource_type != BROKER_LOGGER:
            response.responses.append(next(forwarded))
            continue
        else:
            code, message = _alter_loggers(ports, res, req.validate_only)
        response.responses.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
            error_code=code, error_message=message,
            resource_type=res.resource_type, resource_name=res.resource_name,
        ))
    return response


# -- forwarded to the active controller -----------------------------------------------------------


async def _forward_incremental(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    ctx.release_turn()
    try:
        response: IncrementalAlterConfigsResponse = await ctx.controller.incremental_alter_configs(req)
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        return IncrementalAlterConfigsResponse(responses=[
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=str(exc),
                resource_type=r.resource_type, resource_name=r.resource_name,
            )
            for r in req.resources
        ])
    return response


def _current_overrides(ctx: RequestContext, resource_type: int, name: str) -> dict[str, str]:
    image = ctx.metadata.image
    if resource_type == TOPIC:
        topic = image.topics.get(name)
        return dict(topic.configs) if topic is not None else {}
    if resource_type == BROKER:
        return dict(image.broker_configs.get(name, {}))
    if resource_type == GROUP:
        return dict(image.group_configs.get(name, {}))
    return {}


def _replaceable(resource_type: int) -> set[str]:
    """Every name an override of this resource type can have.

    AlterConfigs deletes all of them but the given ones rather than only the overrides in this
    broker's image: the image may not have a change another broker just committed yet (an
    IncrementalAlterConfigs answered a moment ago through another broker would survive the
    replace). Deleting an absent override writes no record."""
    if resource_type == TOPIC:
        return set(TOPIC_CONFIGS)
    if resource_type == BROKER:
        return set(DYNAMIC_BROKER_CONFIGS) | DYNAMIC_BROKER_KEYS
    if resource_type == GROUP:
        return set(GROUP_CONFIGS)
    return set()


@controller_handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, min_version=0, max_version=1)
async def handle_incremental_alter_configs_on_controller(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    changes = [
        ConfigChange(
            r.resource_type,
            r.resource_name,
            [ConfigOp(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in req.resources
    ]
    outcome = await run_on_controller(
        ctx, lambda c: c.incremental_alter_configs(changes, validate_only=req.validate_only)
    )
    response = IncrementalAlterConfigsResponse()
    Out = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    if outcome is None:
        response.responses = [
            Out(
                error_code=ErrorCode.NOT_CONTROLLER,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ]
        return response
    results, offset = outcome
    response.responses = [
        Out(
            error_code=r.error,
            error_message=r.message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response
