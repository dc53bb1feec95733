"""Views and collector on one node: partition states and the gauges computed from them at scrape
time."""

from __future__ import annotations

from pathlib import Path

from kafkapy.server.http.metrics import BrokerCollector
from kafkapy.server.http.views import partition_views
from tests.server.helpers import Client, create_topic, find_coordinator, list_topics, running_broker


async def test_under_min_isr_and_log_gauges_on_one_node(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, server, port):
        await create_topic(port, "strict", 2, {"min.insync.replicas": "2"})
        await create_topic(port, "lax", 1)
        client = await Client.connect(port)
        await find_coordinator(client, "g")  # __consumer_offsets exists: the topic set is stable
        await client.aclose()
        internal = [t for t in (await list_topics(port)).values() if t.internal]
        assert [t.name for t in internal] == ["__consumer_offsets"]
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
        assert samples[("kafka_server_replicamanager_leadercount", ())] == 3 + sum(t.partitions for t in internal)
        assert samples[("kafka_log_log_numlogsegments", (("partition", "1"), ("topic", "strict")))] == 1
        assert samples[("kafka_log_log_logendoffset", (("partition", "0"), ("topic", "lax")))] == 0
        assert samples[("kafka_controller_kafkacontroller_globaltopiccount", ())] == 2 + len(internal)


async def test_partition_budget_gauges_show_replicas_against_max_broker_partitions(tmp_path: Path) -> None:
    async with running_broker(tmp_path, **{"max.broker.partitions": "40"}) as (_broker, server, port):
        await create_topic(port, "budgeted", 4)
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in BrokerCollector(server).collect()
            for s in family.samples
        }
        held = samples[("kafka_server_replicamanager_partitioncount", ())]
        assert held >= 4
        assert samples[("kafkapy_broker_partition_budget", ())] == 40
        assert samples[("kafkapy_broker_partition_budget_used_ratio", ())] == held / 40
