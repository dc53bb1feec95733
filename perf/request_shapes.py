"""The small requests `request_cost.py --socket` sends, and the trio floor they are read against.

Why these four: they are the requests whose count grows with clients and partitions rather than
with bytes - a one-batch Produce (librdkafka with linger.ms=1 or spread over many partitions), a
consumer's Fetch of what it has not read yet, a group member's Heartbeat and a client's periodic
Metadata refresh of its topics.

Each shape is prepared in-process on the node (the record to fetch is produced, the group is
joined and synced) so that every request the client then sends is answered as in steady state.

The floor: the same client thread and socket pair talking to a minimal trio server that answers
each 64-byte frame with a 64-byte frame - receive, split frames, send - so a shape's broker CPU
per request reads as a multiple of what trio and the kernel alone cost here.
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time
from collections.abc import Callable

import trio

from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.groups import (
    handle_find_coordinator,
    handle_join_group,
    handle_sync_group,
)
from kafkapy.broker.handlers.produce import handle_produce
from kafkapy.protocol import ApiKey, RequestHeader, decode_request, encode_request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    MetadataRequest,
    SyncGroupRequest,
)
from kafkapy.server.broker import Broker

__all__ = ["SHAPES", "floor_cpu_us", "prepare", "run_client"]

SHAPES = ("produce", "fetch", "heartbeat", "metadata")
GROUP = "request-cost"
FLOOR_FRAME = 64  # bytes on the wire, size prefix included

_CLIENT = "request-cost"


def _frame(api_key: ApiKey, version: int, request: object) -> bytes:
    return encode_request(RequestHeader(api_key, version, 1, _CLIENT), request)


async def _call(broker: Broker, handle: Callable[..., object], api_key: ApiKey, version: int,
                request: object) -> object:
    """Run one handler as the connection would (encode and decode included, for defaults)."""
    header, req = decode_request(bytearray(_frame(api_key, version, request)))
    state = ConnectionState("PLAINTEXT", _CLIENT)
    return await handle(RequestContext(broker.ports, header, state, 0), req)  # type: ignore[misc]


async def _join(broker: Broker) -> tuple[str, int]:
    """A one-member group, joined and synced: (member id, generation) for its heartbeats."""
    found = await _call(broker, handle_find_coordinator, ApiKey.FIND_COORDINATOR, 4,
                        FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]))
    assert found.coordinators[0].error_code == 0, found  # type: ignore[attr-defined]
    member = ""
    for _ in range(20):
        join = JoinGroupRequest(
            group_id=GROUP, session_timeout_ms=45_000, rebalance_timeout_ms=10_000, member_id=member,
            protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])
        joined = await _call(broker, handle_join_group, ApiKey.JOIN_GROUP, 7, join)
        member = joined.member_id  # type: ignore[attr-defined]
        if joined.error_code == 0:  # type: ignore[attr-defined]
            break
        if joined.error_code != ErrorCode.MEMBER_ID_REQUIRED:  # type: ignore[attr-defined]
            await trio.sleep(0.05)  # the coordinator is still loading __consumer_offsets
    generation = joined.generation_id  # type: ignore[attr-defined]
    sync = SyncGroupRequest(
        group_id=GROUP, generation_id=generation, member_id=member, protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"")])
    synced = await _call(broker, handle_sync_group, ApiKey.SYNC_GROUP, 5, sync)
    assert synced.error_code == 0, synced  # type: ignore[attr-defined]
    return member, generation


async def prepare(shape: str, args: argparse.Namespace, broker: Broker, produce_frame: bytes,
                  topic: str) -> bytes:
    """The frame the client repeats for `shape`, with what it needs already on the node."""
    if shape == "produce":
        return produce_frame
    if shape == "fetch":
        header, produce = decode_request(bytearray(produce_frame))
        state = ConnectionState("PLAINTEXT", _CLIENT)
        await handle_produce(RequestContext(broker.ports, header, state, 0), produce)
        return _frame(ApiKey.FETCH, 12, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                for p in range(args.partitions)])]))
    if shape == "heartbeat":
        member, generation = await _join(broker)
        return _frame(ApiKey.HEARTBEAT, 4, HeartbeatRequest(
            group_id=GROUP, generation_id=generation, member_id=member))
    assert shape == "metadata", shape
    return _frame(ApiKey.METADATA, 12, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False))


def run_client(sock: socket.socket, frame: bytes, requests: int, inflight: int) -> None:
    """Pipelined client: up to `inflight` requests outstanding (librdkafka's default is 5)."""
    data = struct.pack(">i", len(frame)) + frame
    buf = bytearray()
    sent = answered = 0
    with sock:
        while answered < requests:
            while sent < requests and sent - answered < inflight:
                sock.sendall(data)
                sent += 1
            chunk = sock.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                del buf[: 4 + struct.unpack_from(">i", buf)[0]]
                answered += 1


async def _floor_server(stream: trio.SocketStream) -> None:
    """Receive, split frames, answer each with a 64-byte frame: trio's part of any server."""
    answer = struct.pack(">i", FLOOR_FRAME - 4) + bytes(FLOOR_FRAME - 4)
    buf = bytearray()
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            del buf[: 4 + struct.unpack_from(">i", buf)[0]]
            await stream.send_all(answer)


async def floor_cpu_us(requests: int, inflight: int) -> float:
    """Server-thread CPU us per 64-byte round trip on a socket pair with the minimal server."""
    ours, theirs = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    frame = bytes(FLOOR_FRAME - 4)
    client = threading.Thread(target=run_client, args=(theirs, frame, requests, inflight), daemon=True)
    start = time.thread_time()
    client.start()
    async with stream, trio.open_nursery() as nursery:
        nursery.start_soon(_floor_server, stream)
        await trio.to_thread.run_sync(client.join)
        nursery.cancel_scope.cancel()
    return (time.thread_time() - start) / max(requests, 1) * 1e6
