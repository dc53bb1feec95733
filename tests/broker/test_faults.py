"""Request fault injection (kafkapy.broker.faults): the rules, the connection hook on the wire,
and the Unix control socket a subprocess broker is driven through."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path

import pytest
import trio

from kafkapy.broker.faults import FaultAction, FaultInjector
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ApiVersionsRequest, MetadataRequest, ProduceRequest
from kafkapy.testing.faults import FaultClient, FaultControlError
from tests.server.helpers import Client, batch, create_topic, running_broker


def _produce(topic: str, value: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(value))])])


def _seen(injector: FaultInjector, api_key: int, client_id: str | None = "c") -> FaultAction | None:
    return injector.on_request(api_key, 9, 1, client_id, "PLAINTEXT", "127.0.0.1:1")


# -- the rules ---------------------------------------------------------------------------------
def test_rules_of_a_key_are_used_in_order_and_counted() -> None:
    faults = FaultInjector()
    faults.delay(ApiKey.PRODUCE, 5, count=1)
    faults.fail(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, count=2)
    assert _seen(faults, ApiKey.METADATA) is None  # another key is untouched
    kinds = [getattr(_seen(faults, ApiKey.PRODUCE), "kind", None) for _ in range(4)]
    assert kinds == ["delay", "fail", "fail", None]
    assert faults.rules() == []


def test_count_none_applies_until_clear() -> None:
    faults = FaultInjector()
    faults.drop(ApiKey.FETCH, count=None)
    assert all(getattr(_seen(faults, ApiKey.FETCH), "kind", None) == "drop" for _ in range(50))
    faults.clear()
    assert _seen(faults, ApiKey.FETCH) is None
    assert faults.requests() == [faults.requests()[0]]  # clear() forgot the 50 before


def test_client_id_limits_a_rule_to_one_client() -> None:
    faults = FaultInjector()
    faults.fail(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, client_id="mine")
    assert _seen(faults, ApiKey.PRODUCE, "theirs") is None
    action = _seen(faults, ApiKey.PRODUCE, "mine")
    assert action == FaultAction("fail", error_code=int(ErrorCode.NOT_ENOUGH_REPLICAS))


def test_bad_rules_are_refused() -> None:
    faults = FaultInjector()
    with pytest.raises(ValueError, match="count"):
        faults.drop(ApiKey.PRODUCE, count=0)
    with pytest.raises(ValueError, match="31999"):
        faults.fail(ApiKey.PRODUCE, 31999)  # not a Kafka error code
    with pytest.raises(ValueError, match="delay_ms"):
        faults.delay(ApiKey.PRODUCE, -1)
    with pytest.raises(ValueError, match="unknown op"):
        faults.command({"op": "explode"})
    assert faults.rules() == []


def test_drop_after_produce_append_counts_successful_appends_once() -> None:
    faults = FaultInjector()
    assert not faults.on_produce_append()  # nothing pending: never a drop
    faults.drop_after_produce_append(3)
    assert [faults.on_produce_append() for _ in range(5)] == [False, False, True, False, False]
    faults.command({"op": "drop_after_produce_append", "nth": 1})
    faults.clear()
    assert not faults.on_produce_append(), "clear() forgets a pending drop"
    with pytest.raises(ValueError, match="nth"):
        faults.drop_after_produce_append(0)


def test_observed_requests_are_bounded_and_filtered() -> None:
    faults = FaultInjector(max_observed=10)
    for _ in range(15):
        _seen(faults, ApiKey.METADATA)
    _seen(faults, ApiKey.PRODUCE)
    assert len(faults.requests()) == 10
    assert [r.api_key for r in faults.requests(ApiKey.PRODUCE)] == [ApiKey.PRODUCE]


# -- on the wire -------------------------------------------------------------------------------
async def test_a_broker_has_no_injector_unless_asked() -> None:
    async with running_broker(None) as (broker, _, _port):
        assert broker.fault_injector is None
    async with running_broker(None, **{"kafkapy.test.fault.drop.after.produce.append": "2"}) as (broker, _, _):
        assert broker.fault_injector is not None, "the config's drop is one of the injector's faults"


async def test_failed_produce_answers_the_error_per_partition_and_appends_nothing() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 1)
        broker.fault_injector = faults = FaultInjector()
        faults.fail(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        client = await Client.connect(port)
        failed = await client.request(ApiKey.PRODUCE, 9, _produce("t", b"lost"))
        part = failed.responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        ok = await client.request(ApiKey.PRODUCE, 9, _produce("t", b"kept"))
        assert ok.responses[0].partition_responses[0].base_offset == 0  # the failed one never landed
        assert [r.fault for r in faults.requests(ApiKey.PRODUCE)] == ["fail", None]
        await client.aclose()


async def test_dropped_request_closes_the_connection_after_earlier_answers() -> None:
    async with running_broker(None) as (broker, _, port):
        broker.fault_injector = faults = FaultInjector()
        faults.drop(ApiKey.METADATA)
        client = await Client.connect(port)
        await client.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        _, versions = await client.receive()
        assert versions.error_code == ErrorCode.NONE
        assert await client.read_frame(wait_s=5) is None  # closed, no Metadata answer
        again = await Client.connect(port)  # the broker serves the next connection
        assert (await again.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers
        await again.aclose()


async def test_failing_an_api_without_an_error_field_closes_the_connection() -> None:
    """Metadata has no top-level error code: the injected failure ends like a handler crash."""
    async with running_broker(None) as (broker, _, port):
        broker.fault_injector = faults = FaultInjector()
        faults.fail(ApiKey.METADATA, ErrorCode.UNKNOWN_SERVER_ERROR)
        client = await Client.connect(port)
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        assert await client.read_frame(wait_s=5) is None


async def test_delayed_request_is_held_then_served() -> None:
    async with running_broker(None) as (broker, _, port):
        broker.fault_injector = faults = FaultInjector()
        faults.delay(ApiKey.METADATA, 400)
        client = await Client.connect(port)
        start = trio.current_time()
        answer = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        assert trio.current_time() - start >= 0.4
        assert answer.brokers
        await client.aclose()


# -- the control socket ------------------------------------------------------------------------
async def test_control_socket_installs_rules_in_the_broker(tmp_path: Path) -> None:
    path = tmp_path / "f.sock"
    async with running_broker(None, **{"kafkapy.test.fault.control.socket": str(path)}) as (_, _, port):
        await create_topic(port, "t", 1)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        control = FaultClient(path)
        await trio.to_thread.run_sync(
            lambda: control.fail(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, count=1)
        )
        assert [r.api_key for r in await trio.to_thread.run_sync(control.rules)] == [ApiKey.PRODUCE]
        client = await Client.connect(port)
        failed = await client.request(ApiKey.PRODUCE, 9, _produce("t", b"x"))
        assert failed.responses[0].partition_responses[0].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        seen = await trio.to_thread.run_sync(lambda: control.requests(ApiKey.PRODUCE))
        assert [(r.api_version, r.client_id, r.fault) for r in seen] == [(9, "test", "fail")]
        await trio.to_thread.run_sync(control.clear)
        assert await trio.to_thread.run_sync(control.requests) == []
        await client.aclose()
    assert not path.exists()  # removed at shutdown


async def test_control_socket_answers_bad_commands_and_keeps_serving(tmp_path: Path) -> None:
    path = tmp_path / "f.sock"
    async with running_broker(None, **{"kafkapy.test.fault.control.socket": str(path)}):

        def exchange() -> list[dict[str, object]]:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(10)
                sock.connect(str(path))
                sock.sendall(b'not json\n{"op": "fail", "api_key": 0}\n[1]\n{"op": "rules"}\n')
                data = b""
                while data.count(b"\n") < 4:
                    chunk = sock.recv(65536)
                    assert chunk, "control socket closed early"
                    data += chunk
            return [json.loads(line) for line in data.splitlines()]

        replies = await trio.to_thread.run_sync(exchange)
        assert [r["ok"] for r in replies] == [False, False, False, True]
        assert "error_code" in str(replies[1]["error"])
        assert replies[3]["result"] == []
        with pytest.raises(FaultControlError, match="count"):
            await trio.to_thread.run_sync(lambda: FaultClient(path).drop(ApiKey.FETCH, count=0))


def test_fault_client_names_an_unreachable_socket(tmp_path: Path) -> None:
    with pytest.raises(FaultControlError, match=r"nothing\.sock"):
        FaultClient(tmp_path / "nothing.sock").clear()
