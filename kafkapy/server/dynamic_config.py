"""Dynamic broker configs (Kafka's DynamicBrokerConfig) on a single node.

Why: `kafka-configs --alter --entity-type brokers` and the admin clients' AlterConfigs /
IncrementalAlterConfigs on a BROKER resource change broker settings without a restart - for a
broker id ("1": DYNAMIC_BROKER_CONFIG) or as the cluster-wide default ("":
DYNAMIC_DEFAULT_BROKER_CONFIG). The keys kafkapy takes at run time are the broker defaults of
topic configs (`log.retention.ms`, `log.segment.bytes`, `log.cleanup.policy`,
`message.max.bytes`, `log.message.timestamp.*`, `min.insync.replicas`, ...), all dynamic in Kafka
too; a change re-derives the default log config and applies it to every partition log without
a topic override of that setting at once. Other broker keys are refused (INVALID_CONFIG naming
them), as Kafka refuses keys that need a restart.

Persistence: a single node keeps them in its topic store (`kafkapy-topics.json`, next to the
topic overrides); they are layered into `BrokerConfig` at start-up (`Broker`) and after every
change.
Cluster mode keeps them in the metadata log (ConfigRecord, resource type BROKER): the active
controller validates with `config_rules.dynamic_config_problem` (`kafkapy.controller.configs`),
and each broker applies the image's values the same way (`Broker.apply_metadata` ->
`Broker.apply_dynamic_configs`), so DescribeConfigs on any broker shows them with their source.

Group configs (KIP-848, resource type GROUP) go the same way: checked against the group
coordinator's table and this broker's `group.consumer.min/max.*` bounds
(`config_rules.group_config_check`, which the controller is given), kept in the metadata log
(ConfigRecord, GROUP) in a cluster and in the topic store on a single node, and handed to the
group coordinators through `BrokerConfig.group_configs`, which they read at each heartbeat.
"""

from __future__ import annotations

import trio

from kafkapy.protocol.errors import ErrorCode
from kafkapy.server.broker import Broker, BrokerError
from kafkapy.server.config_rules import (
    DYNAMIC_BROKER_KEYS,
    DYNAMIC_BROKER_LISTS,
    dynamic_config_problem,
    group_config_check,
)
from kafkapy.storage import LogConfig
from kafkapy.storage.errors import InvalidLogConfigError

__all__ = [
    "DYNAMIC_BROKER_KEYS",
    "DYNAMIC_BROKER_LISTS",
    "alter_broker_configs",
    "alter_group_configs",
    "push_defaults",
]


def _check(name: str, value: str) -> None:
    """INVALID_CONFIG unless `name` may change at run time and `value` is valid for it."""
    problem = dynamic_config_problem(name, value)
    if problem is not None:
        raise BrokerError(ErrorCode.INVALID_CONFIG, problem)


def push_defaults(broker: Broker) -> None:
    """Re-apply every topic's config over the new defaults (file writes: a worker thread)."""
    for info in broker.topics.all():
        broker.apply_topic_configs(info)


async def alter_broker_configs(
    broker: Broker, resource: str, values: dict[str, str], *, validate_only: bool = False
) -> None:
    """Replace the dynamic configs of one BROKER resource ("" or this node's id) on a single
    node. Raises BrokerError (INVALID_REQUEST for another broker, INVALID_CONFIG for a key or
    value that cannot be taken)."""
    if resource not in ("", str(broker.node_id)):
        raise BrokerError(ErrorCode.INVALID_REQUEST,
                          f"Unexpected broker id, expected {broker.node_id} or empty string")
    for name, value in values.items():
        _check(name, value)
    current = {k: dict(v) for k, v in broker.topics.broker_configs.items()}
    proposed = {**current, resource: dict(values)}
    layers = broker.config.dynamic_layers()
    broker.config.set_dynamic(proposed.get(str(broker.node_id), {}), proposed.get("", {}))
    try:  # the combination must give a valid log config too
        LogConfig.from_topic_configs(broker.config.topic_defaults())
    except InvalidLogConfigError as e:
        raise BrokerError(ErrorCode.INVALID_CONFIG, str(e)) from None
    finally:
        broker.config.set_dynamic(*layers)
    if validate_only:
        return
    broker.topics.set_broker_configs(resource, values)
    if broker.apply_dynamic_configs(broker.topics.broker_configs):
        await trio.to_thread.run_sync(push_defaults, broker)


async def alter_group_configs(
    broker: Broker, group_id: str, values: dict[str, str], *, validate_only: bool = False
) -> None:
    """Replace one group's configs on a single node (persisted; the coordinators see them at
    their members' next heartbeat). Raises BrokerError (INVALID_REQUEST for an empty group id,
    INVALID_CONFIG for a name or value that cannot be taken)."""
    if not group_id:
        raise BrokerError(ErrorCode.INVALID_REQUEST, "the group id must not be empty")
    problem = group_config_check(broker.config)(values)
    if problem is not None:
        raise BrokerError(ErrorCode.INVALID_CONFIG, problem)
    if validate_only:
        return
    broker.topics.set_group_configs(group_id, values)
    broker.config.set_group_configs(broker.topics.group_configs)
