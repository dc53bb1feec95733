"""The remote tier's broker settings: `rsm.config.*` kept for the object store and hidden from
DescribeConfigs, a tiering broker without a bucket refused at start, and the controller told
whether tiering is on (it validates `remote.storage.enable` with it)."""

from __future__ import annotations

import pytest

from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.broker.remote_log import RemoteLogManager
from kafkapy.server.cluster.controller_driver import controller_config
from kafkapy.server.remote_log_tasks import remote_log_manager

SECRET = "do-not-show-me"
RSM = {
    "rsm.config.storage.s3.bucket.name": "tiered",
    "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:9",
    "rsm.config.storage.aws.secret.access.key": SECRET,
}


def test_rsm_config_keys_are_kept_and_never_listed() -> None:
    config = BrokerConfig({"remote.log.storage.system.enable": "true", **RSM})
    assert config.remote_storage_properties == RSM
    listed = {name: value for name, value, _ in config.items()}
    assert not [name for name in listed if name.startswith("rsm.config.")]
    assert SECRET not in repr(listed)


def test_tiering_broker_builds_its_manager() -> None:
    config = BrokerConfig({"remote.log.storage.system.enable": "true",
                           "remote.log.metadata.topic.num.partitions": "7", **RSM})
    manager = remote_log_manager(config, 1)
    assert isinstance(manager, RemoteLogManager)
    assert manager.metadata_partitions == 7


def test_no_manager_without_tiering() -> None:
    assert remote_log_manager(BrokerConfig(RSM), 1) is None


def test_tiering_without_a_bucket_is_refused_at_start() -> None:
    config = BrokerConfig({"remote.log.storage.system.enable": "true"})
    with pytest.raises(ConfigError, match="bucket"):
        remote_log_manager(config, 1)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_controller_validates_topics_with_the_brokers_setting(enabled: bool) -> None:
    config = BrokerConfig({"remote.log.storage.system.enable": str(enabled).lower(), **RSM})
    assert controller_config(config, config.cluster, "c").remote_log_storage_system_enable is enabled


@pytest.mark.parametrize("enabled", [True, False])
def test_a_broker_builds_its_tiering_parts_only_with_tiering(enabled: bool) -> None:
    """With tiering on, the broker has its remote log manager, the read side over its metadata
    and store, and the periodic tasks; without it, none of them (and their modules load lazily)."""
    from kafkapy.broker.remote_fetch import RemoteTier
    from kafkapy.server.broker import Broker
    from kafkapy.server.remote_log_tasks import RemoteLogTasks

    broker = Broker(BrokerConfig({"remote.log.storage.system.enable": str(enabled).lower(), **RSM}), memory=True)
    try:
        if enabled:
            assert isinstance(broker.remote_log, RemoteLogManager)
            assert isinstance(broker.remote_tier, RemoteTier)
            assert broker.remote_tier.metadata is broker.remote_log.metadata
            assert isinstance(broker.remote_log_tasks, RemoteLogTasks)
        else:
            assert (broker.remote_log, broker.remote_tier, broker.remote_log_tasks) == (None, None, None)
    finally:
        broker.close()
