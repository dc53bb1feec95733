"""The status page's tiered storage (KIP-405) table: per tiered topic, bytes on this node's
disk against bytes in the remote tier, how far behind the copier is, and the remote fetch rate
and errors.

Why its own rows (not columns of the topics table): only `remote.storage.enable` topics have
them, and an operator watching the copier wants them side by side. The remote bytes are the
cluster's (the replayed `__remote_log_metadata`, each segment once); the local bytes are this
node's replicas', as everywhere on the page; the copier lag is of the partitions this node
leads (only a leader copies). Rates come from two consecutive samples of the broker's remote
fetch counters (`RemoteFetchRates`, sampled with the page's history).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedBroker
    from kafkapy.server.http.views import PartitionView

__all__ = ["RemoteFetchRates", "tiered_rows"]

_COUNTERS = ("requests", "bytes", "errors")


def _enabled(configs: dict[str, str]) -> bool:
    return configs.get("remote.storage.enable", "").strip().lower() == "true"


class RemoteFetchRates:
    """Per topic, remote fetches, bytes and failed remote fetches per second over the last
    sample interval (0 before two samples)."""

    def __init__(self) -> None:
        self.per_s: dict[str, dict[str, float]] = {}
        self._last: dict[str, tuple[int, int, int]] = {}
        self._last_time = 0.0

    def sample(self, broker: ServedBroker, now: float) -> None:
        stats = broker.stats
        topics = (set(stats.remote_fetch_requests) | set(stats.remote_fetch_bytes)
                  | set(stats.remote_fetch_errors))
        counts = {t: (stats.remote_fetch_requests.get(t, 0), stats.remote_fetch_bytes.get(t, 0),
                      stats.remote_fetch_errors.get(t, 0)) for t in topics}
        if self._last_time:
            elapsed = max(now - self._last_time, 1e-3)
            self.per_s = {
                t: {name: max(c - p, 0) / elapsed
                    for name, c, p in zip(_COUNTERS, now_c, self._last.get(t, (0, 0, 0)), strict=True)}
                for t, now_c in counts.items()
            }
        self._last, self._last_time = counts, now


def tiered_rows(
    broker: ServedBroker, partitions: list[PartitionView], configs: dict[str, dict[str, str]],
    rates: RemoteFetchRates,
) -> list[dict[str, Any]]:
    """One row per `remote.storage.enable=true` topic (see the module doc), by name."""
    manager = broker.remote_log
    remote = manager.remote_bytes_by_topic() if manager is not None else {}
    lag = manager.copier_lag_by_topic() if manager is not None else {}
    stats = broker.stats
    rows = []
    for topic in sorted(t for t, c in configs.items() if _enabled(c)):
        topic_lag = lag.get(topic)
        per_s = rates.per_s.get(topic, {})
        rows.append({
            "name": topic,
            "local_bytes": sum(v.size_bytes for v in partitions if v.topic == topic and v.local),
            "remote_bytes": remote.get(topic, 0),
            "copy_lag_bytes": topic_lag.bytes if topic_lag else 0,
            "copy_lag_segments": topic_lag.segments if topic_lag else 0,
            "remote_fetches_per_s": per_s.get("requests", 0.0),
            "remote_fetch_bytes_per_s": per_s.get("bytes", 0.0),
            "remote_fetch_errors_per_s": per_s.get("errors", 0.0),
            "remote_fetch_errors": stats.remote_fetch_errors.get(topic, 0),
        })
    return rows
