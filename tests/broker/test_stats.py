"""BrokerStats over real sockets: request and error counts, queue/total times, the request log,
non-Kafka clients named in the log, log flush times; and the error-code walk on its own."""

from __future__ import annotations

import logging
import socket

import pytest
import trio

from kafkapy.broker.stats import Histogram, RequestLog, api_name, error_counts
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest, MetadataRequest, ProduceRequest, ProduceResponse
from kafkapy.protocol.raw_response import RawResponse
from tests.server.helpers import Client, batch, create_topic, running_broker


def produce_request(topic: str, *partitions: int, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.PartitionProduceData(index=p, records=batch(b"a", b"b", b"c"))
                    for p in partitions
                ],
            )
        ],
    )


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.PRODUCE) == "Produce"
    assert api_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert api_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert api_name(9999) == "Unknown9999"


def test_error_counts_walk_nested_elements_and_raw_responses() -> None:
    response = ProduceResponse(responses=[
        ProduceResponse.TopicProduceResponse(name="a", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=0, error_code=0),
            ProduceResponse.PartitionProduceResponse(index=1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ]),
        ProduceResponse.TopicProduceResponse(name="b", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ]),
    ])
    counts: dict[int, int] = {}
    error_counts(response, counts)
    assert counts == {0: 1, ErrorCode.NOT_LEADER_OR_FOLLOWER: 2}
    error_counts(RawResponse(error_counts={0: 2, 3: 1}), counts)
    assert counts == {0: 3, ErrorCode.NOT_LEADER_OR_FOLLOWER: 2, 3: 1}


def test_histogram_buckets_are_cumulative() -> None:
    hist = Histogram((1.0, 10.0))
    for v in (0.5, 1.0, 5.0, 50.0):
        hist.observe(v)
    assert hist.cumulative() == [("1.0", 2), ("10.0", 3), ("+Inf", 4)]
    assert (hist.count, hist.sum) == (4, 56.5)


async def test_request_log_names_must_be_kafka_api_names() -> None:
    assert RequestLog(["produce", " Fetch "]).wants(ApiKey.FETCH)
    assert not RequestLog(["Produce"]).wants(ApiKey.METADATA)
    assert RequestLog(["all"]).wants(ApiKey.METADATA)
    with pytest.raises(ValueError, match=r"unknown API name.*Prodce"):
        RequestLog(["Prodce"])
    with pytest.raises(ValueError, match="Prodce"):
        async with running_broker(None, **{"kafkapy.log.requests": "Prodce"}):
            pass


async def test_requests_errors_and_times_are_counted_per_api() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 2)
        stats = broker.stats
        metadata_before = stats.requests[("Metadata", 12)]  # create_topic waits with Metadata
        client = await Client.connect(port)
        response = await client.request(ApiKey.PRODUCE, 9, produce_request("t", 0, 1, 7))
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        await client.request(ApiKey.PRODUCE, 9, produce_request("t", 0))
        await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        await client.aclose()
        assert stats.requests[("Produce", 9)] == 2
        assert stats.requests[("Metadata", 12)] == metadata_before + 1
        assert stats.errors[("Produce", ErrorCode.NONE)] == 3
        assert stats.errors[("Produce", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)] == 1
        assert stats.total_time_ms["Produce"].count == 2
        assert stats.queue_time_ms["Produce"].count == 2
        assert stats.messages_in["t"] == 9  # 3 batches of 3 records appended
        assert stats.bytes_in["t"] == 3 * len(batch(b"a", b"b", b"c"))


async def test_request_log_line_per_request_of_the_chosen_apis(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.request")
    async with running_broker(None, **{"kafkapy.log.requests": "Produce"}) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, 9, produce_request("t", 0, 3))
        await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        await client.aclose()
    lines = [r for r in caplog.records if r.name == "kafkapy.request"]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    message = lines[0].getMessage()
    assert message.startswith("Produce v9 correlation_id=1 client_id=test principal=User:ANONYMOUS")
    assert "listener=PLAINTEXT" in message
    assert "total_ms=" in message
    assert "queue_ms=" in message
    assert message.endswith("error=UNKNOWN_TOPIC_OR_PARTITION")  # the worst code of the answer


@pytest.mark.parametrize(
    ("first_bytes", "protocol"),
    [
        (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "HTTP"),
        (b"POST /v1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "HTTP"),
        # a TLS 1.2/1.3 ClientHello record header, then some of its body
        (bytes.fromhex("160301020001") + b"\x00" * 64, "TLS"),
    ],
)
async def test_a_non_kafka_client_is_named_in_the_log(
    caplog: pytest.LogCaptureFixture, first_bytes: bytes, protocol: str
) -> None:
    async with running_broker(None) as (broker, _, port):

        def talk() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(first_bytes)
                return sock.recv(100)

        assert await trio.to_thread.run_sync(talk) == b""
        assert broker.stats.non_kafka_connections[("PLAINTEXT", protocol)] == 1
        # the broker keeps serving Kafka clients
        client = await Client.connect(port)
        await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        await client.aclose()
    assert f"a non-Kafka client ({protocol})" in caplog.text


async def test_log_flush_times_are_observed() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "synced", 1, {"flush.messages": "1"})
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, 9, produce_request("synced", 0))
        await client.aclose()
        assert broker.stats.log_flush_ms.count >= 1


async def test_fetches_are_also_counted_as_consumer_or_follower_fetches() -> None:
    async with running_broker(None) as (broker, _, port):
        created = await create_topic(port, "f", 1)
        client = await Client.connect(port)
        topics = [FetchRequest.FetchTopic(topic="f", partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])]
        await client.request(ApiKey.FETCH, 12, FetchRequest(replica_id=-1, max_wait_ms=0, topics=topics))
        follower = FetchRequest(
            replica_state=FetchRequest.ReplicaState(replica_id=2, replica_epoch=1), max_wait_ms=0,
            topics=[FetchRequest.FetchTopic(topic_id=created.topic_id, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])],
        )
        await client.request(ApiKey.FETCH, 15, follower)
        await client.aclose()
        stats = broker.stats
        assert stats.requests[("Fetch", 12)] == stats.requests[("FetchConsumer", 12)] == 1
        assert stats.requests[("Fetch", 15)] == stats.requests[("FetchFollower", 15)] == 1
        assert ("FetchConsumer", 15) not in stats.requests
        assert stats.total_time_ms["Fetch"].count == 2
        assert stats.total_time_ms["FetchConsumer"].count == 1
        assert stats.queue_time_ms["FetchFollower"].count == 1


def test_per_api_figures_sum_every_version_at_scrape_time() -> None:
    """Requests are counted per API and version, errors and times per API: one API's versions
    add up in its histograms and error counts, and a Fetch's role is counted beside it."""
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.protocol import RequestHeader
    from kafkapy.protocol.messages import HeartbeatResponse

    stats = BrokerStats()
    for version, code, ms in ((3, 0, 0.1), (4, 0, 3.0), (4, ErrorCode.REBALANCE_IN_PROGRESS, 30.0)):
        stats.request_done(
            RequestHeader(ApiKey.HEARTBEAT, version, 1, "c"), None, HeartbeatResponse(error_code=code),
            0.2, ms, principal="User:ANONYMOUS", peer="p", listener="PLAINTEXT",
        )
    stats.request_done(
        RequestHeader(ApiKey.FETCH, 12, 2, "c"), FetchRequest(replica_id=-1), RawResponse(error_counts={0: 2}),
        0.0, 1.0, principal="User:ANONYMOUS", peer="p", listener="PLAINTEXT",
    )
    assert stats.requests[("Heartbeat", 3)] == 1
    assert stats.requests[("Heartbeat", 4)] == 2
    assert stats.requests[("FetchConsumer", 12)] == stats.requests[("Fetch", 12)] == 1
    assert stats.errors[("Heartbeat", ErrorCode.NONE)] == 2
    assert stats.errors[("Heartbeat", ErrorCode.REBALANCE_IN_PROGRESS)] == 1
    assert stats.errors[("Fetch", ErrorCode.NONE)] == 2
    assert ("FetchConsumer", ErrorCode.NONE) not in stats.errors
    total = stats.total_time_ms["Heartbeat"]
    assert total.count == 3
    assert total.sum == pytest.approx(33.1)
    assert [n for _, n in total.cumulative()][:6] == [1, 1, 1, 1, 2, 2]  # 0.1 <= 0.25, 3 <= 5
    assert stats.queue_time_ms["Heartbeat"].cumulative()[1] == ("0.5", 3)
    assert stats.total_time_ms["FetchConsumer"].count == 1
