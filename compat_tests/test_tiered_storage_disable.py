"""Turning tiered storage off on a topic (KIP-950) as a user does it: `kafkapy serve` with
tiering on against SeaweedFS, confluent-kafka's AdminClient setting `remote.storage.enable=false`
with `remote.log.delete.on.disable=true` on a topic whose segments are in the bucket.

What users rely on: the topic's remote data is deleted (the bucket listing shows it), the topic
goes on with its local log (produce and consume), and the log start is the local one again.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)

from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server

from .conftest import BrokerProcess
from .test_tiered_storage_copy import (
    TIMEOUT_S,
    _create_topic,
    _local_log_bytes,
    _produce,
    _remote_logs,
    _wait,
    s3,
    tiered,
)

__all__ = ["s3", "tiered"]  # the fixtures this module uses
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _disable(admin: AdminClient, topic: str, **configs: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()])
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    next(iter(futures.values())).result(timeout=TIMEOUT_S)


def test_disabling_remote_storage_with_delete_on_disable_deletes_the_remote_data(
        tiered: tuple[BrokerProcess, int, str], s3: S3Server, topic_name: str) -> None:
    broker, _, prefix = tiered
    store = S3ObjectStore(s3.config(key_prefix=prefix))
    _create_topic(broker, topic_name)
    _produce(broker, topic_name, 300)
    _wait("segments in the bucket", lambda: len(_remote_logs(store, topic_name)) >= 3)
    # local retention removed the oldest copied segments: only the remote tier holds offset 0
    _wait("the local log start past 0", lambda: _local_log_start(broker, topic_name) > 0)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _disable(admin, topic_name, **{"remote.log.copy.disable": "true", "local.retention.bytes": "-2"})
    _disable(admin, topic_name, **{"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
    _wait("the topic's objects gone", lambda: store.list(f"{topic_name}-") == [])
    _produce(broker, topic_name, 5)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name,
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=TIMEOUT_S)
        assert 0 < low < high == 305  # the log start is the local one: the remote data is gone
        assert _local_log_bytes(broker, topic_name) > 0
    finally:
        consumer.close()


def _local_log_start(broker: BrokerProcess, topic: str) -> int:
    """The base offset of the partition's oldest local segment (its file name)."""
    assert broker.data_dir is not None
    return min((int(p.stem) for p in (broker.data_dir / f"{topic}-0").glob("*.log")), default=0)
