"""Produce handler: how a request's batches are told apart (plain vs idempotent producer).

`kafkapy.broker.partitions.producer_batches` reads one field for the common one-batch,
no-producer-id partition instead of parsing every header; whatever the bytes, it must classify
exactly as parsing all headers does, or a retried idempotent batch would be written twice (or a
plain one checked for sequences).
"""

from __future__ import annotations

import time

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.partitions import producer_batches
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode, InvalidRecordError, ProtocolError
from kafkapy.protocol.messages import InitProducerIdRequest, ProduceRequest
from kafkapy.protocol.records import BatchHeader, Record, build_batch, iter_batches
from tests.server.helpers import Client, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)


def _batch(producer_id: int, values: int = 1, control: bool = False) -> bytes:
    records = [Record(i, 0, None, b"v%d" % i, []) for i in range(values)]
    return build_batch(
        records,
        base_timestamp=int(time.time() * 1000),
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        is_control=control,
    )


def _by_parsing_every_header(records: bytes) -> list[BatchHeader] | type[InvalidRecordError]:
    """The classification without any shortcut: parse all headers, [] if unparseable."""
    try:
        headers = [h for _, h in iter_batches(records)]
    except ProtocolError:
        return []
    if not any(h.producer_id >= 0 for h in headers):
        return []
    if any(h.is_control for h in headers):
        return InvalidRecordError
    return headers


@settings(max_examples=200, deadline=None)
@given(
    pids=st.lists(st.sampled_from([-1, -1, 0, 7, 2**40]), min_size=1, max_size=3),
    control=st.booleans(),
    mangle=st.sampled_from(["none", "cut", "junk", "flip"]),
    where=st.integers(0, 10_000),
    junk=st.binary(min_size=1, max_size=70),
)
def test_classification_matches_parsing_every_header(
    pids: list[int], control: bool, mangle: str, where: int, junk: bytes
) -> None:
    raw = bytearray(b"".join(_batch(pid, control=control and i == 0) for i, pid in enumerate(pids)))
    if mangle == "cut":
        del raw[where % len(raw) :]
    elif mangle == "junk":
        raw += junk
    elif mangle == "flip":
        raw[where % len(raw)] ^= junk[0] or 1
    expected = _by_parsing_every_header(bytes(raw))
    if expected is InvalidRecordError:
        with pytest.raises(InvalidRecordError):
            producer_batches(bytes(raw))
        return
    got = producer_batches(memoryview(raw))  # the server hands in a view of its receive buffer
    assert [(h.producer_id, h.base_sequence) for h in got] == [
        (h.producer_id, h.base_sequence)
        for h in expected  # type: ignore[union-attr]
    ]


async def test_one_request_mixing_plain_and_idempotent_partitions() -> None:
    """A retried request: the idempotent partitions answer with their first offsets and are not
    written again, the plain partitions (no producer id) are appended a second time."""
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 6)
        client = await Client.connect(port)
        with trio.fail_after(20):
            init = await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())
            pid = init.producer_id
            parts = {p: _batch(pid if p % 2 else -1, values=2) for p in range(6)}
            req = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=p, records=r)
                                          for p, r in parts.items()])])  # fmt: skip
            first = await client.request(ApiKey.PRODUCE, 9, req)
            again = await client.request(ApiKey.PRODUCE, 9, req)
        for resp in (first, again):
            assert all(
                p.error_code == ErrorCode.NONE for p in resp.responses[0].partition_responses
            )
        offsets = {p.index: p.base_offset for p in again.responses[0].partition_responses}
        assert offsets == {0: 2, 1: 0, 2: 2, 3: 0, 4: 2, 5: 0}
        ends = {p: broker.partition_log("t", p).log_end_offset for p in range(6)}  # type: ignore[union-attr]
        assert ends == {0: 4, 1: 2, 2: 4, 3: 2, 4: 4, 5: 2}


async def test_record_errors_name_the_refused_records_from_v8() -> None:
    """A keyless record on a compacted topic: INVALID_RECORD with Kafka's message and the
    record's index in `record_errors` (v8+); the batch is not written, other partitions are."""
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "c", 2, {"cleanup.policy": "compact"})
        client = await Client.connect(port)
        now = int(time.time() * 1000)
        bad = build_batch([Record(0, 0, b"k", b"a"), Record(1, 0, None, b"b")], base_timestamp=now)
        good = build_batch([Record(0, 0, b"k", b"a")], base_timestamp=now)
        req = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="c", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=bad),
                                      ProduceRequest.PartitionProduceData(index=1, records=good)])])  # fmt: skip
        with trio.fail_after(20):
            resp = await client.request(ApiKey.PRODUCE, 9, req)
        refused, accepted = resp.responses[0].partition_responses
        assert refused.error_code == ErrorCode.INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
            (1, "Compacted topic cannot accept message without key in topic partition c-0.")
        ]
        assert refused.error_message == refused.record_errors[0].batch_index_error_message
        assert accepted.error_code == ErrorCode.NONE
        assert broker.partition_log("c", 0).log_end_offset == 0  # type: ignore[union-attr]
