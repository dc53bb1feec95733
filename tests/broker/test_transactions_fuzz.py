"""Hostile or nonsensical transaction requests (hypothesis): arbitrary transactional ids,
producer ids/epochs, partitions and outcomes for InitProducerId, AddPartitionsToTxn (v3 and the
batched v4 form), transactional and idempotent Produce, AddOffsetsToTxn, EndTxn (v3 and v5),
WriteTxnMarkers and TxnOffsetCommit. Every request gets an answer with a Kafka error code (never
a closed connection or a crash), and the coordinator's state stays describable afterwards."""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from tests.broker.test_transactions import TXN_SETTINGS, txn_batch
from tests.server.helpers import Client, create_topic, running_broker

tids = st.sampled_from(["a", "b", ""])
pids = st.integers(-2, 3)
epochs = st.integers(-2, 3)
topics = st.sampled_from(["t", "missing", "__consumer_offsets"])
APT = AddPartitionsToTxnRequest
W = WriteTxnMarkersRequest
T = TxnOffsetCommitRequest


def requests() -> st.SearchStrategy[tuple[int, int, Any]]:
    return st.one_of(
        st.builds(lambda tid, ms: (ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=ms)),
            st.one_of(st.none(), tids), st.sampled_from([-1, 0, 60_000, 10**9])),
        st.builds(lambda tid, pid, ep, topic, p: (ApiKey.ADD_PARTITIONS_TO_TXN, 3, APT(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=ep,
            v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[p])])),
            tids, pids, epochs, topics, st.integers(-1, 1)),
        st.builds(lambda tid, pid, ep, topic, verify: (ApiKey.ADD_PARTITIONS_TO_TXN, 4, APT(
            transactions=[APT.AddPartitionsToTxnTransaction(
                transactional_id=tid, producer_id=pid, producer_epoch=ep, verify_only=verify,
                topics=[APT.AddPartitionsToTxnTopic(name=topic, partitions=[0])])] * 2)),
            tids, pids, epochs, topics, st.booleans()),
        st.builds(lambda tid, pid, ep, g: (ApiKey.ADD_OFFSETS_TO_TXN, 3, AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=ep, group_id=g)),
            tids, pids, epochs, st.sampled_from(["g", ""])),
        st.builds(lambda tid, pid, ep, commit, v: (ApiKey.END_TXN, v, EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=ep, committed=commit)),
            tids, pids, epochs, st.booleans(), st.sampled_from([3, 5])),
        st.builds(lambda pid, ep, commit, topic: (ApiKey.WRITE_TXN_MARKERS, 1, W(markers=[
            W.WritableTxnMarker(producer_id=pid, producer_epoch=ep, transaction_result=commit,
                                topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[0, 5])])])),
            pids, epochs, st.booleans(), topics),
        st.builds(lambda tid, pid, ep, seq, txn: (ApiKey.PRODUCE, 9, ProduceRequest(
            transactional_id=tid or None, acks=-1, timeout_ms=1000, topic_data=[
                ProduceRequest.TopicProduceData(name="t", partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=txn_batch(
                        pid, ep, seq, b"v", transactional=txn))])])),
            tids, pids, epochs, st.integers(-1, 2), st.booleans()),
        st.builds(lambda tid, pid, ep: (ApiKey.TXN_OFFSET_COMMIT, 3, T(
            transactional_id=tid, group_id="g", producer_id=pid, producer_epoch=ep,
            topics=[T.TxnOffsetCommitRequestTopic(name="t", partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])),
            tids, pids, epochs),
    )


@settings(max_examples=30, deadline=None)
@given(script=st.lists(requests(), min_size=1, max_size=12))
def test_any_transaction_request_gets_an_answer(script: list[tuple[int, int, Any]]) -> None:
    async def main() -> None:
        with trio.fail_after(60):
            async with running_broker(None, **TXN_SETTINGS) as (_, _, port):
                await create_topic(port, "t", 1)
                c = await Client.connect(port)
                for key, version, req in script:
                    resp = await c.request(key, version, req)  # asserts an answer came
                    if key == ApiKey.PRODUCE:
                        code = resp.responses[0].partition_responses[0].error_code
                    else:
                        code = getattr(resp, "error_code", 0)
                    assert ErrorCode(code) in ErrorCode  # a known Kafka code
                d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                    DescribeTransactionsRequest(transactional_ids=["a", "b"]))
                assert len(d.transaction_states) == 2
                lt = await c.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
                assert {t.transactional_id for t in lt.transaction_states} <= {"a", "b"}
                await c.aclose()

    trio.run(main)
