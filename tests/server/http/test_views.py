"""Views and collector on one node without a running server: partition states and the gauges
computed from them at scrape time."""

from __future__ import annotations

from pathlib import Path

from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from kafkapy.server.config import BrokerConfig
from kafkapy.server.http.metrics import BrokerCollector
from kafkapy.server.http.views import partition_views


async def test_under_min_isr_and_log_gauges_on_one_node(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig({"log.dirs": str(tmp_path), "offsets.topic.num.partitions": "1"}))
    try:
        server = Server(broker)
        broker.create_topic("strict", 2, {"min.insync.replicas": "2"})
        broker.create_topic("lax", 1)
        views = {(v.topic, v.partition): v for v in partition_views(broker)}
        assert views[("strict", 0)].under_min_isr
        assert not views[("lax", 0)].under_min_isr
        assert not any(v.under_replicated or v.offline for v in views.values())
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in BrokerCollector(server).collect()
            for s in family.samples
        }
        assert samples[("kafka_server_replicamanager_underminisrpartitioncount", ())] == 2
        assert samples[("kafka_server_replicamanager_leadercount", ())] == 3
        assert samples[("kafka_log_log_numlogsegments", (("partition", "1"), ("topic", "strict")))] == 1
        assert samples[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "lax")))] == 0
        assert samples[("kafka_controller_kafkacontroller_globaltopiccount", ())] == 2
    finally:
        broker.close()
