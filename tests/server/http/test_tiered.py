"""The status page's tiered storage table: which topics get a row, local vs remote bytes, the
copier lag, remote fetch rates from two samples, errors highlighted, names escaped."""

from __future__ import annotations

from typing import Any, cast

from kafkapy.broker.stats import BrokerStats
from kafkapy.server.http.host import ServedBroker
from kafkapy.server.http.page import render_tables
from kafkapy.server.http.tiered import RemoteFetchRates, tiered_rows
from kafkapy.server.http.views import PartitionView
from kafkapy.storage.remote.copier import CopierLag
from tests.server.http.test_status import _status_with


class _Manager:
    """The two figures the table reads of the remote log manager."""

    def remote_bytes_by_topic(self) -> dict[str, int]:
        return {"tiered": 5 * 1024 * 1024, "gone": 7}

    def copier_lag_by_topic(self) -> dict[str, CopierLag]:
        return {"tiered": CopierLag(segments=2, bytes=2048)}


class _Broker:
    def __init__(self, manager: _Manager | None) -> None:
        self.stats = BrokerStats()
        self.remote_log = manager


def _view(topic: str, partition: int, size: int, *, local: bool = True) -> PartitionView:
    return PartitionView(topic, partition, 1, (1,), (1,), local=local, size_bytes=size)


CONFIGS = {"tiered": {"remote.storage.enable": "true", "local.retention.bytes": "1"},
           "plain": {}, "off": {"remote.storage.enable": "false"}}
VIEWS = [_view("tiered", 0, 100), _view("tiered", 1, 50), _view("tiered", 2, 999, local=False),
         _view("plain", 0, 10)]


def _rows(broker: _Broker, rates: RemoteFetchRates) -> list[dict[str, Any]]:
    return tiered_rows(cast(ServedBroker, broker), VIEWS, CONFIGS, rates)


def test_a_row_per_tiered_topic_with_local_remote_and_copier_lag() -> None:
    broker = _Broker(_Manager())
    rows = _rows(broker, RemoteFetchRates())
    assert rows == [{
        "name": "tiered", "local_bytes": 150, "remote_bytes": 5 * 1024 * 1024,
        "copy_lag_bytes": 2048, "copy_lag_segments": 2, "remote_fetches_per_s": 0.0,
        "remote_fetch_bytes_per_s": 0.0, "remote_fetch_errors_per_s": 0.0,
        "remote_fetch_errors": 0,
    }]


def test_remote_fetch_rates_come_from_two_samples() -> None:
    broker = _Broker(_Manager())
    rates = RemoteFetchRates()
    rates.sample(cast(ServedBroker, broker), 100.0)
    assert _rows(broker, rates)[0]["remote_fetches_per_s"] == 0.0
    broker.stats.remote_fetch_requests["tiered"] += 10
    broker.stats.remote_fetch_bytes["tiered"] += 4000
    broker.stats.remote_fetch_errors["tiered"] += 3
    rates.sample(cast(ServedBroker, broker), 102.0)
    row = _rows(broker, rates)[0]
    assert (row["remote_fetches_per_s"], row["remote_fetch_bytes_per_s"],
            row["remote_fetch_errors_per_s"], row["remote_fetch_errors"]) == (5.0, 2000.0, 1.5, 3)


def test_without_a_remote_tier_the_rows_show_nothing_remote() -> None:
    row = _rows(_Broker(None), RemoteFetchRates())[0]
    assert (row["remote_bytes"], row["copy_lag_bytes"], row["copy_lag_segments"]) == (0, 0, 0)


def test_the_page_shows_the_table_only_with_tiered_topics() -> None:
    status = _status_with("g", "t")
    status["tiered"] = []
    assert 'id="tiered"' not in render_tables(status)
    broker = _Broker(_Manager())
    broker.stats.remote_fetch_errors["tiered"] += 4
    status["tiered"] = _rows(broker, RemoteFetchRates())
    status["tiered"][0]["name"] = "<b>tiered</b>"
    html = render_tables(status)
    table = html[html.index('id="tiered"'):html.index("</section>", html.index('id="tiered"'))]
    assert "&lt;b&gt;tiered&lt;/b&gt;" in table
    assert "<b>tiered</b>" not in table
    assert "<td>150 B</td><td>5.0 MiB</td><td>2.0 KiB (2 segments)</td>" in table
    assert '<span class="warn">4 (0.0/s)</span>' in table
