"""ClientQuotaManager and Kafka's rate arithmetic, driven by `now_ms` (no clock, no sockets)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.quota.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    QuotaEntity,
)
from kafkapy.quota.rate import Rate, TokenBucket

U, C = "user", "client-id"

# the eight places a quota can sit, most specific first (Kafka's KIP-55 order)
PRECEDENCE: list[QuotaEntity] = [
    ((C, "app"), (U, "alice")),
    ((C, None), (U, "alice")),
    ((U, "alice"),),
    ((C, "app"), (U, None)),
    ((C, None), (U, None)),
    ((U, None),),
    ((C, "app"),),
    ((C, None),),
]


def test_rate_is_kafkas_sampled_rate() -> None:
    r = Rate(11, 1000)
    # a first burst is spread over ten whole windows (Kafka's minimum), not read as a spike
    r.record(10_000, 0)
    assert r.window_size_ms(0) == 10_000
    assert r.measure(0) == pytest.approx(1000.0)
    # a steady 500/s for 30 s reads as 500/s
    r = Rate(11, 1000)
    for t in range(0, 30_000, 100):
        r.record(50, t)
    assert r.measure(30_000) == pytest.approx(500.0, rel=0.1)
    # nothing for the whole 11 s horizon: every window has expired
    assert r.measure(30_000 + 11_000) == 0.0


def test_throttle_time_is_kafkas_formula() -> None:
    r = Rate(11, 1000)
    r.record(20_000, 0)  # 2,000/s over the 10 s minimum window
    # (rate - bound) / bound * window = (2000 - 1000) / 1000 * 10 s
    assert r.throttle_ms(1000.0, 0) == 10_000
    assert r.throttle_ms(2000.0, 0) == 0


@settings(max_examples=200)
@given(
    sizes=st.lists(st.integers(1, 50_000), min_size=1, max_size=60),
    gaps=st.lists(st.integers(0, 3000), min_size=1, max_size=60),
    bound=st.integers(1_000, 100_000),
)
def test_a_client_that_waits_its_throttle_time_is_back_at_the_bound(sizes: list[int], gaps: list[int], bound: int) -> None:
    """A client that waits the throttle time it is given (KIP-219: the broker mutes it that
    long) sends no more than the quota allows, whatever its request sizes and pauses. (Right
    after the wait its rate may still be above the bound: during the first ten windows Kafka's
    rate divides by a fixed ten seconds, so the next request is throttled again.)"""
    manager = ClientQuotaManager()
    manager.update({((C, "x"),): {PRODUCER_BYTE_RATE: float(bound)}})
    now = 0
    sent = 0
    for i, size in enumerate(sizes):
        throttle = manager.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "x", size, now)
        sent += size
        assert throttle >= 0
        now += throttle
        now += gaps[i % len(gaps)]
    # over the whole run: at most the bound per second, plus the first ten windows' allowance
    # and one request (which is recorded before its throttle is known)
    assert sent <= bound * (now / 1000 + 10) + max(sizes) + bound


@given(st.sets(st.sampled_from(range(len(PRECEDENCE)))), st.sampled_from(["app", "other"]), st.sampled_from(["alice", "bob"]))
def test_the_most_specific_configured_quota_wins(configured: set[int], client: str, user: str) -> None:
    manager = ClientQuotaManager()
    manager.update({PRECEDENCE[i]: {PRODUCER_BYTE_RATE: float(i + 1)} for i in configured})

    def applies(entity: QuotaEntity) -> bool:
        names = dict(entity)
        return all(
            name is None or name == (user if t == U else client) for t, name in names.items()
        )

    expected = next((float(i + 1) for i, e in enumerate(PRECEDENCE) if i in configured and applies(e)), None)
    assert manager.quota(PRODUCER_BYTE_RATE, user, client) == expected
    assert manager.quota(CONSUMER_BYTE_RATE, user, client) is None


def test_who_shares_a_sensor_follows_the_winning_entity() -> None:
    manager = ClientQuotaManager()
    # a user quota is shared by all that user's client ids
    manager.update({((U, "alice"),): {PRODUCER_BYTE_RATE: 1000.0}})
    assert manager.record(PRODUCER_BYTE_RATE, "alice", "a", 10_000, 0) == 0
    assert manager.record(PRODUCER_BYTE_RATE, "alice", "b", 10_000, 0) == 10_000
    assert manager.record(PRODUCER_BYTE_RATE, "bob", "b", 10_000_000, 0) == 0  # no quota for bob
    # a default client-id quota is per client id: each gets its own allowance
    manager = ClientQuotaManager()
    manager.update({((C, None),): {PRODUCER_BYTE_RATE: 1000.0}})
    assert manager.record(PRODUCER_BYTE_RATE, "alice", "a", 10_000, 0) == 0
    assert manager.record(PRODUCER_BYTE_RATE, "alice", "b", 10_000, 0) == 0
    assert manager.record(PRODUCER_BYTE_RATE, "bob", "b", 10_000, 0) == 10_000  # same client id


def test_nothing_configured_is_disabled_and_a_removed_quota_stops_throttling() -> None:
    manager = ClientQuotaManager()
    assert not manager.enabled(PRODUCER_BYTE_RATE)
    assert manager.record(PRODUCER_BYTE_RATE, "u", "c", 1e12, 0) == 0
    manager.update({((C, "c"),): {PRODUCER_BYTE_RATE: 100.0}})
    assert manager.enabled(PRODUCER_BYTE_RATE)
    assert not manager.enabled(CONSUMER_BYTE_RATE)
    assert manager.record(PRODUCER_BYTE_RATE, "u", "c", 10_000, 0) > 0
    manager.update({})
    assert not manager.enabled(PRODUCER_BYTE_RATE)
    assert manager.record(PRODUCER_BYTE_RATE, "u", "c", 10_000, 0) == 0


def test_request_percentage_throttle_is_capped_at_one_window() -> None:
    manager = ClientQuotaManager()
    manager.update({((U, None),): {REQUEST_PERCENTAGE: 1.0}})
    # 5 s of handler time = 500 percent-seconds, against 1 %: far over, held one window only
    assert manager.record(REQUEST_PERCENTAGE, "u", "c", 500.0, 0) == 1000


def test_controller_mutations_use_a_token_bucket() -> None:
    bucket = TokenBucket(2.0, 0)  # 2 partitions/s, burst 22
    assert bucket.tokens(0) == 22.0
    bucket.record(30, 0)
    assert bucket.throttle_ms(0) == 4000  # -8 tokens at 2/s
    assert bucket.throttle_ms(4000) == 0
    manager = ClientQuotaManager()
    manager.update({((C, "admin"),): {CONTROLLER_MUTATION_RATE: 1.0}})
    assert manager.mutation_throttle_ms("u", "admin", 0) == 0
    assert manager.record_mutations("u", "admin", 15, 0) == 4000  # 11 - 15 = -4 at 1/s
    assert manager.mutation_throttle_ms("u", "admin", 1000) == 3000
    assert manager.mutation_throttle_ms("u", "other", 1000) == 0


def test_idle_sensors_expire() -> None:
    manager = ClientQuotaManager()
    manager.update({((C, None),): {PRODUCER_BYTE_RATE: 1000.0}})
    manager.record(PRODUCER_BYTE_RATE, "u", "c", 100_000, 0)
    manager.expire(5_000)
    assert manager.throttle_ms(PRODUCER_BYTE_RATE, "u", "c", 5_000) > 0
    manager.expire(60_000)
    assert manager.throttle_ms(PRODUCER_BYTE_RATE, "u", "c", 60_000) == 0
