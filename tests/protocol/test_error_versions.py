"""Error codes newer than the request version (kafkapy/protocol/error_versions.py)."""

from __future__ import annotations

import pytest

from kafkapy.protocol import ApiKey
from kafkapy.protocol.error_versions import ERRORS_SINCE, downgrade_errors, older_codes
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import (
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    ProduceResponse,
)


def _add_partitions(code: E) -> AddPartitionsToTxnResponse:
    result = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
        name="t",
        results_by_partition=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                partition_index=0, partition_error_code=code
            )
        ],
    )
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[result])


def _partition_code(resp: AddPartitionsToTxnResponse) -> int:
    return resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


@pytest.mark.parametrize("version", [0, 1])
def test_add_partitions_v0_v1_get_invalid_producer_epoch_for_a_fenced_producer(version: int) -> None:
    resp = downgrade_errors(ApiKey.ADD_PARTITIONS_TO_TXN, version, _add_partitions(E.PRODUCER_FENCED))
    assert _partition_code(resp) == E.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("version", [2, 3])
def test_versions_that_know_producer_fenced_keep_it(version: int) -> None:
    resp = downgrade_errors(ApiKey.ADD_PARTITIONS_TO_TXN, version, _add_partitions(E.PRODUCER_FENCED))
    assert _partition_code(resp) == E.PRODUCER_FENCED


def test_top_level_and_nested_codes_and_other_codes_untouched() -> None:
    assert downgrade_errors(ApiKey.END_TXN, 1, EndTxnResponse(error_code=E.PRODUCER_FENCED)).error_code == E.INVALID_PRODUCER_EPOCH
    init = InitProducerIdResponse(error_code=E.PRODUCER_FENCED)
    assert downgrade_errors(ApiKey.INIT_PRODUCER_ID, 3, init).error_code == E.INVALID_PRODUCER_EPOCH
    assert downgrade_errors(ApiKey.END_TXN, 1, EndTxnResponse(error_code=E.CONCURRENT_TRANSACTIONS)).error_code == E.CONCURRENT_TRANSACTIONS
    part = ProduceResponse.PartitionProduceResponse(index=0, error_code=E.KAFKA_STORAGE_ERROR)
    produce = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[part])])
    downgrade_errors(ApiKey.PRODUCE, 3, produce)
    assert part.error_code == E.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("api", "code"), [(api, code) for api, codes in ERRORS_SINCE.items() for code in codes]
)
def test_every_table_entry_applies_exactly_below_its_version(api: ApiKey, code: E) -> None:
    since, older = ERRORS_SINCE[api][code]
    assert older is not code
    assert older_codes(api, since - 1).get(code) is older
    assert code not in older_codes(api, since)
