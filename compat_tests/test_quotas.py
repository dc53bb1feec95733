"""Client quotas with real clients against a broker subprocess: a confluent-kafka (librdkafka)
producer's and consumer's achieved rate drop to their byte-rate quota, they see throttle_time_ms
> 0 (librdkafka's throttle callback), and an unthrottled client id on the same broker runs far
faster; the Java Admin client's alterClientQuotas / describeClientQuotas (neither
confluent-kafka nor kafka-python has a client quota API).

How the rate is measured: bytes acknowledged (producer) or received (consumer) during the run,
divided by its length. Kafka's arithmetic gives a new client ten seconds' worth of quota at once
(its rate divides by at least ten one-second windows), then holds it back until its rate over the
eleven windows is at the bound again, so the traffic comes as a burst and a trickle; over a run
longer than the windows the average is the quota. The band is generous (<= 2x the quota) for a
loaded machine; unthrottled the same client runs at > 10x. The trickle must keep moving (bytes in
the second half of the run): throttled, not stalled.
"""

from __future__ import annotations

import math
import time

import pytest
from confluent_kafka import Consumer, Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat_tests.conftest import BrokerProcess, unique_topic
from compat_tests.java.harness import JavaClient, java_build
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from kafkapy.testing.admin import KafkaAdmin

pytestmark = pytest.mark.timeout(180)

QUOTA = 100 * 1024  # bytes per second
VALUE = b"v" * 1000
RUN_S = 20.0


def _produce_for(bootstrap: str, topic: str, client_id: str, seconds: float, throttles: list[int]) -> list[tuple[float, int]]:
    """(time, bytes) of every acknowledged message of a producer that sends as fast as it can."""
    acked: list[tuple[float, int]] = []

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append((time.monotonic(), len(VALUE)))

    def throttled(event: object) -> None:
        throttles.append(int(getattr(event, "throttle_time", 0) * 1000))

    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
        "batch.size": 16384, "queue.buffering.max.messages": 2000, "throttle_cb": throttled,
    })
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
    producer.flush(30)
    return acked


def _rate(events: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(n for t, n in events if start <= t < end) / (end - start)




def test_a_producer_is_held_to_its_byte_rate_quota(broker: BrokerProcess) -> None:
    topic = unique_topic("quota-produce")
    admin = KafkaAdmin(broker.bootstrap)
    admin.create_topic(topic)
    admin.set_client_quotas({"client-id": "quota-slow-producer"}, {"producer_byte_rate": QUOTA})
    throttles: list[int] = []
    started = time.monotonic()
    slow = _produce_for(broker.bootstrap, topic, "quota-slow-producer", RUN_S, throttles)
    slow_rate = _rate(slow, started, started + RUN_S)
    late = _rate(slow, started + RUN_S / 2, started + RUN_S)
    fast_throttles: list[int] = []
    started = time.monotonic()
    fast = _produce_for(broker.bootstrap, topic, "quota-free-producer", 3.0, fast_throttles)
    fast_rate = _rate(fast, started, started + 3.0)
    print(f"producer: quota {QUOTA} B/s, throttled {slow_rate:.0f} B/s over {RUN_S:.0f} s ({late:.0f} B/s in "
          f"its second half), max throttle {max(throttles, default=0)} ms; unthrottled {fast_rate:.0f} B/s")
    assert slow_rate <= 2 * QUOTA
    assert late > 0
    assert max(throttles, default=0) > 0
    assert fast_rate > 10 * QUOTA
    assert fast_throttles == []


def _consume_for(bootstrap: str, topic: str, client_id: str, seconds: float, throttles: list[int]) -> list[tuple[float, int]]:
    received: list[tuple[float, int]] = []

    def throttled(event: object) -> None:
        throttles.append(int(getattr(event, "throttle_time", 0) * 1000))

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False, "throttle_cb": throttled,
        "max.partition.fetch.bytes": 65536,
    })
    consumer.subscribe([topic])
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                received.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()
    return received


def _fill(bootstrap: str, topic: str, nbytes: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "quota-filler", "linger.ms": 5, "batch.size": 16384})
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0


def test_a_consumer_is_held_to_its_byte_rate_quota(broker: BrokerProcess) -> None:
    topic = unique_topic("quota-consume")
    admin = KafkaAdmin(broker.bootstrap)
    admin.create_topic(topic)
    _fill(broker.bootstrap, topic, 8 * 1024 * 1024)
    admin.set_client_quotas({"client-id": "quota-slow-consumer"}, {"consumer_byte_rate": QUOTA})
    throttles: list[int] = []
    started = time.monotonic()
    slow = _consume_for(broker.bootstrap, topic, "quota-slow-consumer", RUN_S, throttles)
    slow_rate = _rate(slow, started, started + RUN_S)
    late = _rate(slow, started + RUN_S / 2, started + RUN_S)
    fast_throttles: list[int] = []
    started = time.monotonic()
    fast = _consume_for(broker.bootstrap, topic, "quota-free-consumer", 4.0, fast_throttles)
    fast_bytes = sum(n for _, n in fast)
    print(f"consumer: quota {QUOTA} B/s, throttled {slow_rate:.0f} B/s over {RUN_S:.0f} s ({late:.0f} B/s in "
          f"its second half), max throttle {max(throttles, default=0)} ms; unthrottled {fast_bytes} B in 4 s "
          "(group join included)")
    assert slow_rate <= 2 * QUOTA
    assert late > 0
    assert max(throttles, default=0) > 0
    assert fast_bytes > 10 * QUOTA * 4.0 * 0.5  # > 10x the quota even counting half the run
    assert fast_throttles == []




@pytest.mark.timeout(240)
def test_java_admin_client_quota_api(tmp_path_factory: pytest.TempPathFactory, broker: BrokerProcess) -> None:
    """kafka-clients' alterClientQuotas / describeClientQuotas (what kafka-configs.sh
    --entity-type users/clients runs): user + client-id, user + default client-id, client-id
    entities; contains / containsOnly / default filters; validateOnly; a negative value refused
    with InvalidRequestException; a removed quota gone."""
    prefix = unique_topic("java-quota")
    user, client = f"{prefix}-user", f"{prefix}-client"
    events = JavaClient(java_build(tmp_path_factory), broker.bootstrap).run("quotas", prefix)

    def described(label: str) -> list[list[dict[str, object]]]:
        entries: list[list[dict[str, object]]] = events.one("described", filter=label)["entries"]
        return sorted(entries, key=str)

    assert described("user-exact") == sorted([
        [{"client-id": client, "user": user}, {"producer_byte_rate": 1048576.0}],
        [{"client-id": "<default>", "user": user}, {"consumer_byte_rate": 2097152.0}],
    ], key=str)
    assert described("client-only-strict") == [[{"client-id": client}, {"request_percentage": 25.5}]]
    assert [{"client-id": "<default>", "user": user}, {"consumer_byte_rate": 2097152.0}] in described("default-client")
    assert described("validated") == []
    refused = events.one("refused")
    assert refused["class"] == "InvalidRequestException"
    assert "greater than 0" in refused["message"]
    assert described("after-remove") == [[{"client-id": "<default>", "user": user}, {"consumer_byte_rate": 2097152.0}]]


_names = st.none() | st.text(max_size=6)
_types = st.sampled_from(["user", "client-id", "ip", "", "group", "user "])
_keys = st.sampled_from(["producer_byte_rate", "consumer_byte_rate", "request_percentage",
                         "controller_mutation_rate", "connection_creation_rate", "", "x"])
_values = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10, 10**12).map(float)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(st.tuples(
        st.lists(st.tuples(_types, _names), max_size=3),
        st.lists(st.tuples(_keys, _values, st.booleans()), max_size=3),
    ), max_size=4),
    validate_only=st.booleans(),
    components=st.lists(st.tuples(_types, st.integers(-1, 3), _names), max_size=3),
    strict=st.booleans(),
    version=st.integers(0, 1),
)
def test_any_quota_request_gets_kafkas_answer(
    broker: BrokerProcess,
    entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]],
    validate_only: bool,
    components: list[tuple[str, int, str | None]],
    strict: bool,
    version: int,
) -> None:
    """Whatever entities, keys and values (NaN, infinities, negatives, unknown types) an
    AlterClientQuotas or DescribeClientQuotas carries, each entry is answered NONE or
    INVALID_REQUEST (a describe: NONE, INVALID_REQUEST or UNSUPPORTED_VERSION) and the broker
    serves on; validate_only never stores anything."""
    admin = KafkaAdmin(broker.bootstrap, client_id="quota-fuzz")
    alter = AlterClientQuotasRequest(validate_only=validate_only, entries=[
        AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[AlterClientQuotasRequest.OpData(key=k, value=v, remove=r) for k, v, r in ops],
        )
        for entity, ops in entries
    ])
    answer = admin._send(ApiKey.ALTER_CLIENT_QUOTAS, version, alter)
    assert len(answer.entries) == len(entries)
    assert {e.error_code for e in answer.entries} <= {ErrorCode.NONE, ErrorCode.INVALID_REQUEST}
    describe = DescribeClientQuotasRequest(strict=strict, components=[
        DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components
    ])
    described = admin._send(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, describe)
    assert described.error_code in {ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.UNSUPPORTED_VERSION}
    everything = admin._send(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, DescribeClientQuotasRequest())
    assert everything.error_code == ErrorCode.NONE
    for item in everything.entries or []:
        for value in item.values:
            assert math.isfinite(value.value)
            assert value.value > 0
    assert broker.is_running(), broker.log_tail()
    assert "Traceback" not in broker.log_text(), broker.log_tail()
