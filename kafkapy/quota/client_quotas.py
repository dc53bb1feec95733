"""ClientQuotaManager: which quota applies to a request, its rate sensor, and the throttle time.

Why a plain class: quota decisions are arithmetic over the client's identity, the configured
quotas and the clock; the server only feeds it (`update` from the published metadata image,
`record` from the handlers with `now_ms`) and mutes the connection for the answer. Tests drive
it with any `now_ms` they like.

Which quota (Kafka's DefaultQuotaCallback, KIP-55 precedence; per quota key, the first entity
that has that key wins; `<default>` is a None name):
    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id.
The winning entity decides whose traffic shares one sensor (Kafka's metric tags): a quota on a
user alone (or the default user) is shared by every client id of that user, a quota on a client
id alone by every user using it, and the two-part ones are per (user, client-id).

Quota keys and what they meter (Kafka's units):
- `producer_byte_rate`: Produce request bytes per second (Rate sensor);
- `consumer_byte_rate`: Fetch response bytes per second (Rate sensor);
- `request_percentage`: handler time as a percentage of one thread per second (Rate sensor;
  the throttle time is capped at one quota window, as Kafka's request quota is);
- `controller_mutation_rate`: partitions created / deleted per second (token bucket: a
  request may take the bucket below zero; the next one is refused while it is below).

Hot path: with no quota of a key configured `enabled(key)` is False and callers skip the rest;
with quotas configured, a client's sensor lookup is one dict access (its resolution is cached
until the next `update`).
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.quota.rate import Rate, TokenBucket

__all__ = [
    "CLIENT_THROTTLE_VERSIONS",
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "ClientQuotaManager",
    "QuotaEntity",
    "client_throttles",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
_RATE_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
USER, CLIENT_ID = "user", "client-id"

#: (entity type, name) pairs sorted by type; a None name is the default entity
QuotaEntity = tuple[tuple[str, str | None], ...]
#: whose traffic shares a sensor: (user or "", client id or "")
_Tags = tuple[str, str]
_DEFAULT = None
#: how often idle clients' sensors are dropped (the first record after it does it)
EXPIRY_INTERVAL_MS = 60_000


def _precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, _Tags]]:
    """The entities that may hold a client's quota, most specific first, with the sensor
    each one implies (see the module docstring)."""
    return [
        (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
        (((CLIENT_ID, _DEFAULT), (USER, user)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, _DEFAULT)), (user, client_id)),
        (((CLIENT_ID, _DEFAULT), (USER, _DEFAULT)), (user, client_id)),
        (((USER, _DEFAULT),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, _DEFAULT),), ("", client_id)),
    ]


class ClientQuotaManager:
    """See the module docstring."""

    def __init__(self, *, samples: int = 11, window_ms: int = 1000) -> None:
        self.samples = samples
        self.window_ms = window_ms
        #: quota key -> entity -> bound
        self._quotas: dict[str, dict[QuotaEntity, float]] = {}
        self._resolved: dict[tuple[str, str, str], tuple[_Tags, float] | None] = {}
        self._rates: dict[tuple[str, _Tags], Rate] = {}
        self._buckets: dict[_Tags, TokenBucket] = {}
        self._enabled: frozenset[str] = frozenset()
        #: any quota configured at all (False: the request path skips quotas entirely)
        self.active = False
        self._next_expiry_ms = 0

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Take the configured quotas (the metadata image's `client_quotas`). Sensors keep
        their history: a changed bound applies to the traffic already measured, as in Kafka."""
        by_key: dict[str, dict[QuotaEntity, float]] = {}
        for entity, values in quotas.items():
            for key, bound in values.items():
                by_key.setdefault(key, {})[entity] = bound
        if by_key == self._quotas:
            return
        self._quotas = by_key
        self._enabled = frozenset(by_key)
        self.active = bool(by_key)
        self._resolved.clear()
        for tags in list(self._buckets):
            resolved = self._resolve(CONTROLLER_MUTATION_RATE, *tags)
            if resolved is None or resolved[1] != self._buckets[tags].rate:
                del self._buckets[tags]

    def enabled(self, key: str) -> bool:
        """Is any quota of `key` configured? (the one check the request path makes first)"""
        return key in self._enabled

    def quota(self, key: str, user: str, client_id: str) -> float | None:
        """The bound that applies to this client, or None (unlimited)."""
        resolved = self._resolve(key, user, client_id)
        return None if resolved is None else resolved[1]

    def _resolve(self, key: str, user: str, client_id: str) -> tuple[_Tags, float] | None:
        cache_key = (key, user, client_id)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        found: tuple[_Tags, float] | None = None
        configured = self._quotas.get(key)
        if configured:
            for entity, tags in _precedence(user, client_id):
                bound = configured.get(entity)
                if bound is not None:
                    found = (tags, bound)
                    break
        if len(self._resolved) > 100_000:  # many distinct client ids: start over
            self._resolved.clear()
        self._resolved[cache_key] = found
        return found

    def _rate(self, key: str, tags: _Tags) -> Rate:
        rate = self._rates.get((key, tags))
        if rate is None:
            rate = self._rates[(key, tags)] = Rate(self.samples, self.window_ms)
        return rate

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Count `value` against the client's `key` quota (a Rate key) and return the throttle
        time in ms (0: within the quota or no quota)."""
        if key not in self._enabled:
            return 0
        resolved = self._resolve(key, user, client_id)
        if resolved is None:
            return 0
        tags, bound = resolved
        if now_ms >= self._next_expiry_ms:
            self.expire(now_ms)
            self._next_expiry_ms = now_ms + EXPIRY_INTERVAL_MS
        rate = self._rate(key, tags)
        rate.record(value, now_ms)
        throttle = rate.throttle_ms(bound, now_ms)
        if key == REQUEST_PERCENTAGE:
            throttle = min(throttle, self.window_ms)
        return throttle

    def throttle_ms(self, key: str, user: str, client_id: str, now_ms: int) -> int:
        """The client's throttle time for `key` now, without recording anything (a fetch that
        would be over its quota before reading any data)."""
        if key not in self._enabled:
            return 0
        resolved = self._resolve(key, user, client_id)
        if resolved is None:
            return 0
        tags, bound = resolved
        rate = self._rates.get((key, tags))
        return 0 if rate is None else rate.throttle_ms(bound, now_ms)

    # -- controller mutations (token bucket) -------------------------------------------------

    def _bucket(self, user: str, client_id: str, now_ms: int) -> TokenBucket | None:
        resolved = self._resolve(CONTROLLER_MUTATION_RATE, user, client_id)
        if resolved is None:
            return None
        tags, bound = resolved
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket(bound, now_ms, self.samples, self.window_ms)
        return bucket

    def mutation_throttle_ms(self, user: str, client_id: str, now_ms: int) -> int:
        """> 0 while the client's mutation bucket is below zero (a strict request is refused
        with THROTTLING_QUOTA_EXCEEDED then)."""
        if CONTROLLER_MUTATION_RATE not in self._enabled:
            return 0
        bucket = self._bucket(user, client_id, now_ms)
        return 0 if bucket is None else bucket.throttle_ms(now_ms)

    def record_mutations(self, user: str, client_id: str, partitions: int, now_ms: int) -> int:
        """Take `partitions` tokens; the throttle time that leaves (0 when none)."""
        if CONTROLLER_MUTATION_RATE not in self._enabled:
            return 0
        bucket = self._bucket(user, client_id, now_ms)
        if bucket is None:
            return 0
        bucket.record(partitions, now_ms)
        return bucket.throttle_ms(now_ms)

    def expire(self, now_ms: int) -> None:
        """Drop the rate sensors with nothing recorded in their whole window (idle clients)."""
        for key, rate in list(self._rates.items()):
            if rate.measure(now_ms) == 0.0:
                del self._rates[key]


#: KIP-219: the first version of each API whose clients hold themselves back for a response's
#: throttle_time_ms (Kafka's `shouldClientThrottle`); the broker sends those responses at once and
#: mutes the connection, while older versions get their response delayed instead. APIs not
#: named here were added after KIP-219: their clients throttle from version 0.
CLIENT_THROTTLE_VERSIONS: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Does a client of this request version hold itself back for throttle_time_ms?"""
    return version >= CLIENT_THROTTLE_VERSIONS.get(api_key, 0)
