"""ControllerChannel's typed admin writes (kafkapy.server.cluster.lifecycle).

What a broker relies on: a forwarded admin write returns the controller's answer of the API it
sent, with the controller's metadata offset stripped and waited for; an answer of another type
(a controller or codec bug) is a PeerError - which the handlers answer as NOT_CONTROLLER, so the
client retries - never a wrong object handed to the handler.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafkapy.broker.config import BrokerConfig
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)
from kafkapy.server.cluster.controller_driver import set_metadata_offset
from kafkapy.server.cluster.lifecycle import ControllerChannel
from kafkapy.server.cluster.peer import PeerError

VOTERS = "1@127.0.0.1:19001,2@127.0.0.1:19002,3@127.0.0.1:19003"


class Publisher:
    def __init__(self) -> None:
        self.waited: list[int] = []

    async def wait_applied(self, offset: int, timeout_s: float) -> bool:
        self.waited.append(offset)
        return True


def channel_answering(answer: Any) -> tuple[ControllerChannel, Publisher, list[ApiKey]]:
    config = BrokerConfig({
        "node.id": "1",
        "process.roles": "broker,controller",
        "controller.quorum.voters": VOTERS,
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19001",
        "controller.listener.names": "CONTROLLER",
    })
    publisher = Publisher()
    # node 2 is the active controller: the channel sends there (the wire below is faked)
    node = SimpleNamespace(
        node_id=1, config=config.cluster, controller_security=None,
        raft=SimpleNamespace(leader_id=2), publisher=publisher, controller=None, lifecycle=None,
    )
    channel = ControllerChannel(SimpleNamespace(config=config), node)  # type: ignore[arg-type]
    sent: list[ApiKey] = []

    async def request_while_leader(
        pool: Any, leader: int, api_key: ApiKey, version: int, body: Any, timeout_s: float
    ) -> Any:
        assert leader == 2
        sent.append(api_key)
        return answer

    channel._request_while_leader = request_while_leader  # type: ignore[method-assign]
    return channel, publisher, sent


async def test_an_admin_write_returns_its_answer_after_the_image_has_it() -> None:
    answer = CreateTopicsResponse(topics=[CreateTopicsResponse.CreatableTopicResult(name="t")])
    set_metadata_offset(answer, 42)
    channel, publisher, sent = channel_answering(answer)
    got = await channel.create_topics(CreateTopicsRequest(timeout_ms=1000))
    assert got is answer
    assert sent == [ApiKey.CREATE_TOPICS]
    assert publisher.waited == [42], "the write's metadata offset is waited for locally"


async def test_an_answer_of_another_api_is_a_peer_error() -> None:
    channel, publisher, _ = channel_answering(DeleteTopicsResponse())
    with pytest.raises(PeerError, match="CREATE_TOPICS: the controller answered a DeleteTopicsResponse"):
        await channel.create_topics(CreateTopicsRequest(timeout_ms=1000))
    assert publisher.waited == []


async def test_a_non_admin_call_answered_by_another_api_is_a_peer_error() -> None:
    # the channel checks every caller's answer type, not only the admin writes': a broker's
    # producer id block request (ids handed to idempotent producers) never reads a wrong object
    channel, _, sent = channel_answering(DeleteTopicsResponse())
    with pytest.raises(PeerError, match="ALLOCATE_PRODUCER_IDS: the controller answered a DeleteTopicsResponse"):
        await channel.allocate_producer_ids()
    assert sent == [ApiKey.ALLOCATE_PRODUCER_IDS]


async def test_a_call_returns_the_answer_typed_as_asked() -> None:
    answer = AllocateProducerIdsResponse(producer_id_start=1000, producer_id_len=10)
    channel, _, _ = channel_answering(answer)
    got = await channel.call(
        ApiKey.ALLOCATE_PRODUCER_IDS, 0, AllocateProducerIdsRequest(), AllocateProducerIdsResponse
    )
    assert got is answer
    assert await channel.allocate_producer_ids() == (1000, 10)
