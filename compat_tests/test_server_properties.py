"""A `server.properties` written for a single-node KRaft Kafka starts kafkapy unchanged.

What users rely on (issue 4): they bring the file they already use with Kafka. Keys kafkapy acts on
take effect (checked through a real client: auto-created topics get `num.partitions`, and
DescribeConfigs on the broker reports the file's value as a static broker config); keys it does
not know (thread counts, socket buffers, quorum settings) are ignored, never fatal.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from compat_tests.conftest import BrokerFactory, unique_topic

pytestmark = pytest.mark.timeout(60)

# The shape of Kafka's own config/server.properties for a combined KRaft node (our own text).
KRAFT_PROPERTIES = """\
# single-node KRaft broker + controller
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs={log_dirs}
num.partitions=4
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kraft_server_properties_work_as_is(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    log_dirs = tmp_path / "kraft-logs"
    props = tmp_path / "server.properties"
    props.write_text(KRAFT_PROPERTIES.format(log_dirs=log_dirs))
    # --listeners only swaps the fixed port for a free one; everything else comes from the file.
    broker = broker_factory.start(dir_from_config=True, extra_args=["--config", str(props)])
    assert str(log_dirs) in broker.log_text(), "the ready line should name log.dirs from the file"

    topic = unique_topic("kraft-auto")
    prod = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    prod.produce(topic, value=b"hello")  # auto-created with num.partitions from the file
    assert prod.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(topic, timeout=15)
    assert len(md.topics[topic].partitions) == 4

    futures = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entries = next(iter(futures.values())).result(timeout=15)
    entry = entries["num.partitions"]
    assert entry.value == "4"
    source = ConfigSource(getattr(entry.source, "value", entry.source))
    assert source == ConfigSource.STATIC_BROKER_CONFIG
    assert any(log_dirs.glob(f"{topic}-*")), "partition directories belong in log.dirs"
