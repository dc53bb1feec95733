"""The status page's routes and data in-process: /api/status, the page and its fragment, the
assets, the history's rates, and that names from clients are escaped in the HTML."""

from __future__ import annotations

import http.client
import json
from typing import Any

import trio

from kafkapy.protocol import ApiKey
from kafkapy.server.http.page import render_page
from kafkapy.server.http.status import History, status_json
from tests.broker.test_stats import produce_request
from tests.server.helpers import Client, create_topic, running_broker

HTTP = {"kafkapy.http.listener": "127.0.0.1:0"}


def fetch(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


async def test_api_status_page_fragment_and_assets() -> None:
    async with running_broker(None, **HTTP) as (_, server, port):
        assert server.http is not None
        await create_topic(port, "shown", 2)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, 9, produce_request("shown", 0, 1))
        await client.aclose()
        http_port = server.http.port
        status, ctype, body = await trio.to_thread.run_sync(fetch, http_port, "/api/status")
        assert (status, ctype) == (200, "application/json")
        data = json.loads(body)
        assert data["cluster"]["node_id"] == 1
        assert data["cluster"]["ready"] is True
        replicas = sum(1 for p in data["partitions"])
        assert data["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None,
                                    "fenced": False, "in_controlled_shutdown": False,
                                    "replicas": replicas, "leaders": replicas}]
        assert data["partition_budget"] == {"max_broker_partitions": None, "max_partitions": None,
                                            "partitions": replicas}
        shown = [p for p in data["partitions"] if p["topic"] == "shown"]
        assert [(p["partition"], p["log_end_offset"], p["leader"], p["isr"]) for p in shown] == [
            (0, 3, 1, [1]), (1, 3, 1, [1])
        ]
        topic = next(t for t in data["topics"] if t["name"] == "shown")
        assert (topic["partitions"], topic["messages"], topic["internal"]) == (2, 6, False)
        assert len(data["history"]) >= 1  # sampled as soon as the listener serves
        _, _, body = await trio.to_thread.run_sync(fetch, http_port, "/api/status?summary=1")
        summary = json.loads(body)
        assert summary["partitions"] == []
        assert summary["partition_count"] == len(data["partitions"]) == data["partition_count"]
        assert summary["under_replicated"] == 0

        status, ctype, page = await trio.to_thread.run_sync(fetch, http_port, "/")
        assert (status, ctype) == (200, "text/html; charset=utf-8")
        assert b'data-topic="shown"' in page
        assert b'<script src="/assets/page.js">' in page
        status, _, fragment = await trio.to_thread.run_sync(fetch, http_port, "/?fragment=tables")
        assert status == 200
        assert b'data-topic="shown"' in fragment
        assert b"<html" not in fragment
        for name, kind in (("page.js", "text/javascript"), ("page.css", "text/css")):
            status, ctype, asset = await trio.to_thread.run_sync(fetch, http_port, f"/assets/{name}")
            assert status == 200
            assert ctype.startswith(kind)
            assert len(asset) > 500


async def test_history_rates_follow_the_counters() -> None:
    async with running_broker(None) as (_, server, port):
        history = History(server)
        await create_topic(port, "r", 1)
        history.sample()
        client = await Client.connect(port)
        for _ in range(4):
            await client.request(ApiKey.PRODUCE, 9, produce_request("r", 0))
        await client.aclose()
        await trio.sleep(0.05)
        history.sample()
        first, last = history.samples[0], history.samples[-1]
        assert last.messages_in - first.messages_in == 12
        rates = history.rates()
        elapsed = (last.t_ms - first.t_ms) / 1000
        assert rates["messages_in"] == 12 / max(elapsed, 1e-3)
        assert history.partition_rates[("r", 0)] > 0
        assert status_json(server, history)["rates"] == rates


def _status_with(group_id: str, topic: str) -> dict[str, Any]:
    return {
        "cluster": {"cluster_id": "c", "node_id": 1, "version": "0", "mode": "single node",
                    "ready": True, "not_ready_reason": "", "pid": 1, "listeners": [],
                    "controller_id": 1, "active_controller": True, "quorum": None},
        "brokers": [], "partition_budget": {"max_broker_partitions": None, "max_partitions": None, "partitions": 0},
        "connections": 0, "rates": {"messages_in": 0, "bytes_in": 0, "bytes_out": 0},
        "cluster_rates": {"messages_in": 0, "bytes_in": 0, "partitions_seen": 0, "partitions": 0},
        "partition_count": 0, "under_replicated": 0,
        "topics": [{"name": topic, "partitions": 1, "size_bytes": 0, "messages": 0,
                    "messages_per_s": 0.0, "bytes_per_s": 0.0, "internal": False,
                    "under_replicated": 0, "configs": {}}],
        "partitions": [], "hot_partitions": [], "storage": {"uncleanable": [], "offline": []},
        "groups": [{"group_id": group_id, "protocol": "classic", "state": "Empty", "lag": 0,
                    "members": [{"member_id": group_id, "client_id": "<b>x</b>", "client_host": "/h"}],
                    "offsets": []}],
        "history": [], "sample_s": 2.0,
    }


def test_names_from_clients_are_escaped() -> None:
    evil = '<img src=x onerror="alert(1)">'
    page = render_page(_status_with(evil, "t"))
    assert evil not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<b>x</b>" not in page


async def test_topic_configs_hot_partitions_and_cluster_rates() -> None:
    async with running_broker(None) as (_, server, port):
        await create_topic(port, "cool", 1)
        await create_topic(port, "hot", 2, {"retention.ms": "3600000", "cleanup.policy": "delete"})
        history = History(server)
        history.sample()
        client = await Client.connect(port)
        for _ in range(3):
            await client.request(ApiKey.PRODUCE, 9, produce_request("hot", 1))
        await client.request(ApiKey.PRODUCE, 9, produce_request("cool", 0, 1))
        await client.aclose()
        await trio.sleep(0.05)
        history.sample()
        status = status_json(server, history)
        topics = {t["name"]: t for t in status["topics"]}
        assert topics["hot"]["configs"] == {"cleanup.policy": "delete", "retention.ms": "3600000"}
        assert topics["cool"]["configs"] == {}
        hot = [(p["topic"], p["partition"]) for p in status["hot_partitions"]]
        assert hot[:2] == [("hot", 1), ("cool", 0)]
        assert all(not t.startswith("__") for t, _ in hot)
        by_tp = {(p["topic"], p["partition"]): p for p in status["partitions"]}
        assert by_tp[("hot", 1)]["bytes_per_s"] > by_tp[("cool", 0)]["bytes_per_s"] > 0
        assert by_tp[("hot", 0)]["bytes_per_s"] == 0
        cluster = status["cluster_rates"]
        assert cluster["messages_in"] == sum(
            p["messages_per_s"] for p in status["partitions"] if not p["topic"].startswith("__")
        ) > 0
        assert (cluster["partitions_seen"], cluster["partitions"]) == (3, 3)

        html = render_page(status)
        assert "<code>retention.ms=3600000</code>" in html
        assert "Size (this replica)" in html
        assert "(this node's replicas)" in html
        assert 'class="hot-partitions"' in html
        assert 'id="cluster-messages-in"' in html


async def test_single_node_puts_raft_last_and_collapsed_and_opens_small_sections() -> None:
    async with running_broker(None) as (_, server, port):
        await create_topic(port, "t", 1)
        html = render_page(status_json(server, History(server)))
        cluster_table = html[html.index('id="cluster-table"'):html.index("</table>", html.index('id="cluster-table"'))]
        assert "Raft" not in cluster_table
        raft = html.index('<details class="raft" id="raft-internals">')
        assert raft > html.index('id="groups"')
        assert raft > html.index('id="topics"')
        assert '<details class="topic" id="topic-t" data-topic="t" open>' in html


def test_brokers_show_racks_leaders_and_replicas_against_the_budget() -> None:
    status = _status_with("g", "t")
    status["brokers"] = [
        {"node_id": 1, "host": "h1", "port": 9092, "rack": "a", "fenced": False,
         "in_controlled_shutdown": False, "replicas": 55, "leaders": 20},
        {"node_id": 2, "host": "h2", "port": 9092, "rack": None, "fenced": False,
         "in_controlled_shutdown": False, "replicas": 10, "leaders": 5},
    ]
    status["partition_budget"] = {"max_broker_partitions": 60, "max_partitions": None, "partitions": 40}
    page = render_page(status)
    assert '<span class="rack">a</span>' in page
    assert '<span class="budget warn">55 / 60 (92%)</span>' in page  # at 90% or more: a warning
    assert '<span class="budget">10 / 60 (17%)</span>' in page
    assert "max.broker.partitions=60" in page
    assert "max.partitions=unlimited</code> (40 partitions in the cluster)" in page
