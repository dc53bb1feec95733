"""DescribeConfigs entries of a topic and a broker key's synonyms: DescribeConfigs (`configs.py`)
and CreateTopics' answer (v5+, `topics.py`) describe a topic's configs the same way."""

from __future__ import annotations

from kafkapy.broker.config import TOPIC_CONFIGS, ConfigSource
from kafkapy.broker.metadata_store import TopicInfo
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.protocol.messages.describe_configs import (
    DescribeConfigsResponse_DescribeConfigsResourceResult as Entry,
)
from kafkapy.protocol.messages.describe_configs import (
    DescribeConfigsResponse_DescribeConfigsSynonym as Synonym,
)

__all__ = ["broker_synonyms", "topic_config_entries"]


def topic_config_entries(
    ports: RequestPorts,
    info: TopicInfo,
    *,
    include_synonyms: bool,
    keys: list[str] | None = None,
    include_documentation: bool = False,
) -> list[Entry]:
    entries: list[Entry] = []
    for name, key in TOPIC_CONFIGS.items():
        if (keys is not None and name not in keys) or (not key.listed and name not in info.configs):
            continue
        default_value, _, default_source = ports.config.topic_default(name)
        synonyms: list[Synonym] = []
        if name in info.configs:
            value, source = info.configs[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
            synonyms.append(Synonym(name=name, value=value, source=source))
        else:
            value, source = default_value, default_source
        synonyms += broker_synonyms(ports, key.broker_synonyms)
        entries.append(
            Entry(
                name=name,
                value=value,
                read_only=False,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                config_source=source,
                is_sensitive=False,
                synonyms=synonyms if include_synonyms else [],
                config_type=key.type,
                documentation=key.doc if include_documentation else None,
            )
        )
    return entries


_LAYERED = (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            ConfigSource.STATIC_BROKER_CONFIG)


def broker_synonyms(ports: RequestPorts, names: tuple[str, ...] | list[str]) -> list[Synonym]:
    """Kafka's synonym order for broker keys: every dynamic per-broker value, then every
    dynamic cluster default, then every static one (each in the synonyms' precedence order),
    then the first built-in default."""
    layers = {name: ports.config.layers(name) for name in names}
    out = [
        Synonym(name=name, value=value, source=source)
        for source in _LAYERED
        for name in names
        for value, layer in layers[name]
        if layer == source
    ]
    for name in names:
        default = [v for v, layer in layers[name] if layer == ConfigSource.DEFAULT_CONFIG]
        if default:
            out.append(Synonym(name=name, value=default[0], source=ConfigSource.DEFAULT_CONFIG))
            break
    return out
