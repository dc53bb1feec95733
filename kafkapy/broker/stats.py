"""The broker's own counters: what the request path counts as it goes, for `/metrics` and the page.

Why plain ints in dicts and not prometheus-client metric objects on the hot path: everything here
is touched only from the trio thread, so a counter is `d[key] += n` - no lock, no label lookup,
no per-sample object - and the work is per request, per partition batch or per connection
event, never per record. `kafkapy.server.http.metrics` turns these into Prometheus metric
families at scrape time; gauges (partition states, log sizes, group lag, ...) are not kept here
at all but computed by those collectors from the state the broker already has.

`request_done` is the one hook the connection calls per request: request count per API and
version, error counts per API and error code (every error code the response carries, NONE
included, as Kafka's `ErrorsPerSec` counts them), total time and queue time histograms, and the
optional per-request log line (`kafkapy.log.requests`, see `RequestLog`).
"""

from __future__ import annotations

import dataclasses
import logging
from bisect import bisect_left
from collections import defaultdict
from typing import Any

from kafkapy.protocol import ApiKey, RequestHeader
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.raw_response import RawResponse

__all__ = [
    "LATENCY_BUCKETS_MS",
    "BrokerStats",
    "Histogram",
    "RequestLog",
    "api_name",
    "error_counts",
]

request_log = logging.getLogger("kafkapy.request")

#: histogram bounds in ms: sub-millisecond produce up to a long-poll fetch's max wait and beyond
LATENCY_BUCKETS_MS = (
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
    10000.0, 30000.0,
)


def api_name(api_key: int) -> str:
    """Kafka's name of an API as its metrics label it: `Produce`, `ListOffsets`, `ApiVersions`."""
    return _API_NAMES.get(api_key) or f"Unknown{api_key}"


_API_NAMES: dict[int, str] = {
    int(key): "".join(w.capitalize() for w in key.name.split("_")) for key in ApiKey
}


class Histogram:
    """A fixed-bucket histogram: `observe` is one bisect and two additions."""

    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_MS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, cumulative count) pairs as Prometheus wants them, ending with +Inf."""
        out: list[tuple[str, int]] = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out


# -- error codes of a response ------------------------------------------------------------------
#: per message class: (has a top-level error_code, names of its list fields); (False, ()) for
#: anything that is not a message (ints in replica lists, strings)
_WALK_PLANS: dict[type, tuple[bool, tuple[str, ...]]] = {}
_NOTHING: tuple[bool, tuple[str, ...]] = (False, ())


def _plan(cls: type) -> tuple[bool, tuple[str, ...]]:
    if not dataclasses.is_dataclass(cls):
        plan = _NOTHING
    else:
        fields = dataclasses.fields(cls)
        lists = tuple(
            f.name for f in fields if f.default_factory is list and f.name != "unknown_tagged_fields"
        )
        plan = ("error_code" in {f.name for f in fields}, lists)
    _WALK_PLANS[cls] = plan
    return plan


def error_counts(response: Any, counts: dict[int, int]) -> None:
    """Add every `error_code` in a response message (top level and nested) to `counts`.

    Per response element (partition, group, ...), never per record; the walk plan of each
    message class is worked out once. A hand-built response (`RawResponse`) brings its own."""
    if isinstance(response, RawResponse):
        for code, n in (response.error_counts or {0: 1}).items():
            counts[code] = counts.get(code, 0) + n
        return
    has_code, lists = _WALK_PLANS.get(type(response)) or _plan(type(response))
    if has_code:
        code = response.error_code
        counts[code] = counts.get(code, 0) + 1
    for name in lists:
        items = getattr(response, name)
        if items and (_WALK_PLANS.get(type(items[0])) or _plan(type(items[0]))) is not _NOTHING:
            for item in items:
                error_counts(item, counts)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class RequestLog:
    """`kafkapy.log.requests`: which APIs get one INFO line per request (logger
    `kafkapy.request`). Empty: none; `all`: every API."""

    __slots__ = ("all", "apis")

    def __init__(self, names: list[str]) -> None:
        given = {n.strip() for n in names if n.strip()}
        wanted = {n.lower() for n in given}
        self.all = "all" in wanted or "*" in wanted
        known = {name.lower(): key for key, name in _API_NAMES.items()}  # name -> api key
        unknown = {n for n in given if n.lower() not in known and n.lower() not in ("all", "*")}
        if unknown:
            raise ValueError(
                f"kafkapy.log.requests: unknown API name(s) {', '.join(sorted(unknown))} "
                "(use Kafka's names, e.g. Produce,Fetch,Metadata, or all)"
            )
        self.apis = frozenset(int(known[n]) for n in wanted if n in known)

    def wants(self, api_key: int) -> bool:
        return self.all or api_key in self.apis


class BrokerStats:
    """Counters of one broker (see the module doc); read by the collectors at scrape time."""

    def __init__(self, request_log_apis: list[str] | None = None) -> None:
        self.request_log = RequestLog(request_log_apis or [])
        # per topic: BrokerTopicMetrics
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.bytes_out: dict[str, int] = defaultdict(int)
        self.replication_bytes_out: dict[str, int] = defaultdict(int)
        #: the part of bytes_out this broker sent as a follower of the partition (KIP-392)
        self.follower_bytes_out: dict[str, int] = defaultdict(int)
        #: consumer fetches served from the remote tier (KIP-405): bytes, reads, failed reads
        self.remote_fetch_bytes: dict[str, int] = defaultdict(int)
        self.remote_fetch_requests: dict[str, int] = defaultdict(int)
        self.remote_fetch_errors: dict[str, int] = defaultdict(int)
        # per API and version: RequestMetrics, summed per label at scrape time
        self._meters: dict[tuple[int, int], _RequestMeter] = {}
        self._fetch_meters: dict[tuple[bool, int], _RequestMeter] = {}
        # connections and authentication, per listener
        self.connections_created: dict[str, int] = defaultdict(int)
        self.connections_closed: dict[str, int] = defaultdict(int)
        self.non_kafka_connections: dict[tuple[str, str], int] = defaultdict(int)
        #: (listener, mechanism, succeeded) -> SASL authentications
        self.authentications: dict[tuple[str, str, bool], int] = defaultdict(int)
        # replication and storage
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.log_flush_ms = Histogram()
        self.raft_commit_latency_ms = Histogram()
        self.transactions_completed: dict[str, int] = defaultdict(int)

    # -- hot path: one call per partition batch --------------------------------------------------
    def produced(self, topic: str, size: int, messages: int) -> None:
        self.messages_in[topic] += messages
        self.bytes_in[topic] += size

    def fetched(self, topic: str, size: int, *, follower: bool, read_from_follower: bool = False) -> None:
        """`follower`: a replica's fetch; `read_from_follower`: a consumer's, served by this
        broker as a follower of the partition."""
        if follower:
            self.replication_bytes_out[topic] += size
        else:
            self.bytes_out[topic] += size
            if read_from_follower:
                self.follower_bytes_out[topic] += size

    # -- one call per request ----------------------------------------------------------------------
    def request_done(
        self,
        header: RequestHeader,
        request: Any,
        response: Any,
        queue_ms: float,
        total_ms: float,
        *,
        principal: str,
        peer: str,
        listener: str,
    ) -> None:
        """A request was handled: `response` is the message (None: no answer, acks=0 or a closed
        connection; an int: the error code answered when the handler failed). A Fetch is also
        counted and timed as FetchConsumer or FetchFollower, as Kafka's RequestMetrics do.

        Integer adds into the meter of the request's API and version (`_RequestMeter`); the
        per-API sums Prometheus shows are made at scrape time (`requests`, `errors`, ...)."""
        api_key = header.api_key
        version = header.api_version
        meter = self._meters.get((api_key, version)) or self._new_meter(api_key, version)
        meter.count += 1
        meter.total[bisect_left(LATENCY_BUCKETS_MS, total_ms)] += 1
        meter.total_sum += total_ms
        meter.queue[bisect_left(LATENCY_BUCKETS_MS, queue_ms)] += 1
        meter.queue_sum += queue_ms
        errors = meter.errors
        if type(response) is RawResponse:
            for code, n in (response.error_counts or _NONE_ONCE).items():
                errors[code] = errors.get(code, 0) + n
        elif isinstance(response, int):
            errors[response] = errors.get(response, 0) + 1
        elif response is not None:
            error_counts(response, errors)
        if api_key == _FETCH:
            follower = _replica_id(request, version) >= 0
            role = self._fetch_meters.get((follower, version))
            if role is None:
                name = "FetchFollower" if follower else "FetchConsumer"
                role = self._fetch_meters[(follower, version)] = _RequestMeter(name, version)
            role.observe(queue_ms, total_ms)
        if meter.logged:
            self._log_request(header, response, queue_ms, total_ms, principal, peer, listener)

    def _new_meter(self, api_key: int, version: int) -> _RequestMeter:
        meter = self._meters[(api_key, version)] = _RequestMeter(api_name(api_key), version)
        meter.logged = self.request_log.wants(api_key)
        return meter

    def _log_request(
        self, header: RequestHeader, response: Any, queue_ms: float, total_ms: float,
        principal: str, peer: str, listener: str,
    ) -> None:
        """The `kafkapy.log.requests` line: the worst error code the response carries."""
        counts: dict[int, int] = {}
        if isinstance(response, int):
            counts[response] = 1
        elif response is not None:
            error_counts(response, counts)
        worst = max((c for c in counts if c), default=0)
        request_log.info(
            "%s v%d correlation_id=%d client_id=%s principal=%s peer=%s listener=%s "
            "queue_ms=%.2f total_ms=%.2f error=%s",
            api_name(header.api_key),
            header.api_version,
            header.correlation_id,
            header.client_id,
            principal,
            peer,
            listener,
            queue_ms,
            total_ms,
            _error_name(worst) if response is not None else "NO_RESPONSE",
        )

    # -- scrape time: the per-API sums ------------------------------------------------------------
    def _all_meters(self) -> list[_RequestMeter]:
        return [*self._meters.values(), *self._fetch_meters.values()]

    @property
    def requests(self) -> dict[tuple[str, int], int]:
        """(API name, version) -> requests; Fetch also as FetchConsumer and FetchFollower."""
        out: dict[tuple[str, int], int] = defaultdict(int)
        for meter in self._all_meters():
            out[(meter.name, meter.version)] += meter.count
        return out

    @property
    def errors(self) -> dict[tuple[str, int], int]:
        """(API name, error code) -> how often responses carried it (NONE included)."""
        out: dict[tuple[str, int], int] = defaultdict(int)
        for meter in self._meters.values():
            for code, n in meter.errors.items():
                out[(meter.name, code)] += n
        return out

    @property
    def total_time_ms(self) -> dict[str, Histogram]:
        """API name -> its requests' total time (all versions)."""
        return self._histograms(total=True)

    @property
    def queue_time_ms(self) -> dict[str, Histogram]:
        """API name -> its requests' time waiting for their turn (all versions)."""
        return self._histograms(total=False)

    def _histograms(self, *, total: bool) -> dict[str, Histogram]:
        out: dict[str, Histogram] = {}
        for meter in self._all_meters():
            hist = out.get(meter.name)
            if hist is None:
                hist = out[meter.name] = Histogram()
            counts = meter.total if total else meter.queue
            hist.counts = [a + b for a, b in zip(hist.counts, counts, strict=True)]
            hist.sum += meter.total_sum if total else meter.queue_sum
            hist.count += meter.count
        return out


class _RequestMeter:
    """One API version's request counters: what `request_done` adds to, with no label lookup
    and no per-sample object - bucket counts of `LATENCY_BUCKETS_MS`, sums, error codes."""

    __slots__ = (
        "count", "errors", "logged", "name", "queue", "queue_sum", "total", "total_sum", "version",
    )

    def __init__(self, name: str, version: int) -> None:
        self.name = name
        self.version = version
        self.count = 0
        self.errors: dict[int, int] = {}
        self.total = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # the last one is +Inf
        self.queue = [0] * (len(LATENCY_BUCKETS_MS) + 1)
        self.total_sum = 0.0
        self.queue_sum = 0.0
        #: requests of this API get a `kafkapy.log.requests` line (fixed with the broker's config)
        self.logged = False

    def observe(self, queue_ms: float, total_ms: float) -> None:
        self.count += 1
        self.total[bisect_left(LATENCY_BUCKETS_MS, total_ms)] += 1
        self.total_sum += total_ms
        self.queue[bisect_left(LATENCY_BUCKETS_MS, queue_ms)] += 1
        self.queue_sum += queue_ms


_NONE_ONCE = {0: 1}
_FETCH = int(ApiKey.FETCH)


def _replica_id(request: Any, version: int) -> int:
    """The fetching replica (-1: a consumer); from v15 it is in ReplicaState (KIP-903)."""
    if version >= 15:
        state = getattr(request, "replica_state", None)
        return int(getattr(state, "replica_id", -1)) if state is not None else -1
    return int(getattr(request, "replica_id", -1))
