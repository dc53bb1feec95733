"""Client quotas in the controller: AlterClientQuotas as ClientQuotaRecords (Kafka's validation
and error codes), replay into the image, snapshots, and DescribeClientQuotas' filter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.controller.controller import QuotaAlteration, QuotaOp
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.quotas import (
    MAX_RECORDS_PER_USER_OP,
    FilterComponent,
    describe_client_quotas,
)
from kafkapy.controller.records import (
    ClientQuotaRecord,
    QuotaEntity,
    RecordType,
    decode_record,
    encode_record,
)
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import Cluster
from tests.kafka_reference import kafka_reference

U, C = "user", "client-id"
EXACT, DEFAULT, ANY = 0, 1, 2


def _cluster() -> Cluster:
    c = Cluster()
    c.start(1)
    return c


def _alter(
    c: Cluster, entity: list[tuple[str, str | None]], *ops: QuotaOp, validate_only: bool = False
) -> tuple[ErrorCode, str | None]:
    [r] = c.run(c.ctl.alter_client_quotas([QuotaAlteration(entity, list(ops))], validate_only=validate_only))
    return r.error, r.message


def _reference() -> dict[str, Any]:
    text = kafka_reference("metadata", "ClientQuotaRecord.json").read_text()
    data: dict[str, Any] = json.loads("\n".join(x for x in text.splitlines() if not x.lstrip().startswith("//")))
    return data


def test_client_quota_record_has_kafkas_type_id_and_fields() -> None:
    ref = _reference()
    assert ref["apiKey"] == RecordType.CLIENT_QUOTA == 14
    fields = [(f["name"], f["type"]) for f in ref["fields"]]
    assert fields == [("Entity", "[]EntityData"), ("Key", "string"), ("Value", "float64"), ("Remove", "bool")]
    entity = {f["name"]: f for f in ref["fields"][0]["fields"]}
    assert set(entity) == {"EntityType", "EntityName"}
    assert "nullableVersions" in entity["EntityName"]  # None = the default entity
    assert "nullableVersions" not in entity["EntityType"]
    ours = [f.name for f in ClientQuotaRecord.__dataclass_fields__.values()]
    assert ours == ["entity", "key", "value", "remove"]


@given(
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.text(max_size=8)), max_size=3).map(tuple),
    st.text(max_size=20),
    st.floats(allow_nan=False),
    st.booleans(),
)
def test_client_quota_record_round_trips(entity: QuotaEntity, key: str, value: float, remove: bool) -> None:
    record = ClientQuotaRecord(entity, key, value, remove)
    assert decode_record(encode_record(record)) == record


def test_set_change_and_remove_write_records_and_replay_into_the_image() -> None:
    c = _cluster()
    entity = [(C, "app"), (U, "alice")]  # any order: stored sorted by type
    result = c.ctl.alter_client_quotas([QuotaAlteration(entity, [QuotaOp("producer_byte_rate", 1024.0)])])
    key = ((C, "app"), (U, "alice"))
    assert result.records == [ClientQuotaRecord(key, "producer_byte_rate", 1024.0)]
    c.run(result)
    assert c.replica.client_quotas == {key: {"producer_byte_rate": 1024.0}}
    assert c.last_delta.client_quotas_changed
    # the same value again writes nothing; a removal of an unset key neither
    assert c.ctl.alter_client_quotas([QuotaAlteration(entity, [QuotaOp("producer_byte_rate", 1024.0)])]).records == []
    assert c.ctl.alter_client_quotas([QuotaAlteration(entity, [QuotaOp("consumer_byte_rate", None)])]).records == []
    assert _alter(c, [(U, None)], QuotaOp("request_percentage", 12.5)) == (ErrorCode.NONE, None)
    assert _alter(c, entity, QuotaOp("producer_byte_rate", None)) == (ErrorCode.NONE, None)
    assert c.replica.client_quotas == {((U, None),): {"request_percentage": 12.5}}
    assert _alter(c, [(U, None)], QuotaOp("request_percentage", None)) == (ErrorCode.NONE, None)
    assert c.replica.client_quotas == {}


def test_validate_only_checks_but_writes_nothing() -> None:
    c = _cluster()
    assert _alter(c, [(C, "x")], QuotaOp("consumer_byte_rate", 10.0), validate_only=True) == (ErrorCode.NONE, None)
    assert c.replica.client_quotas == {}
    error, _ = _alter(c, [(C, "x")], QuotaOp("consumer_byte_rate", -1.0), validate_only=True)
    assert error is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("entity", "ops", "message"),
    [
        ([(U, "a")], [QuotaOp("producer_bytes_rate", 10.0)], "Invalid configuration key producer_bytes_rate"),
        ([(U, "a")], [QuotaOp("producer_byte_rate", -5.0)], "must be greater than 0"),
        ([(U, "a")], [QuotaOp("producer_byte_rate", 0.0)], "must be greater than 0"),
        ([(U, "a")], [QuotaOp("request_percentage", float("inf"))], "must be greater than 0"),
        ([(U, "a")], [QuotaOp("producer_byte_rate", 10.5)], "cannot be a fractional value"),
        ([(U, "a")], [QuotaOp("producer_byte_rate", 1e30)], "too large"),
        ([(U, "a")], [QuotaOp("producer_byte_rate", 1.0), QuotaOp("producer_byte_rate", 2.0)], "Duplicate quota key"),
        ([], [QuotaOp("producer_byte_rate", 1.0)], "Invalid empty client quota entity"),
        ([(U, "a"), (U, "b")], [QuotaOp("producer_byte_rate", 1.0)], "duplicate entity entry user"),
        ([("group", "g")], [QuotaOp("producer_byte_rate", 1.0)], "Unhandled client quota entity type: group"),
        ([(U, "")], [QuotaOp("producer_byte_rate", 1.0)], "Empty user not supported"),
        ([("ip", "1.2.3.4")], [QuotaOp("connection_creation_rate", 1.0)], "ip quotas"),
    ],
)
def test_bad_alterations_are_invalid_request_and_write_nothing(
    entity: list[tuple[str, str | None]], ops: list[QuotaOp], message: str
) -> None:
    c = _cluster()
    # a good key next to the bad one is not written either (per entity, all or nothing)
    result = c.ctl.alter_client_quotas([QuotaAlteration(entity, [QuotaOp("consumer_byte_rate", 5.0), *ops])])
    [r] = result.response
    assert r.error is ErrorCode.INVALID_REQUEST
    assert r.message is not None
    assert message in r.message
    assert result.records == []


def test_one_bad_entity_leaves_the_others_alone_and_duplicates_fail_both() -> None:
    c = _cluster()
    results = c.run(
        c.ctl.alter_client_quotas(
            [
                QuotaAlteration([(C, "good")], [QuotaOp("producer_byte_rate", 100.0)]),
                QuotaAlteration([(C, "bad")], [QuotaOp("producer_byte_rate", -1.0)]),
                QuotaAlteration([(U, "u"), (C, "c")], [QuotaOp("producer_byte_rate", 1.0)]),
                QuotaAlteration([(C, "c"), (U, "u")], [QuotaOp("consumer_byte_rate", 1.0)]),
            ]
        )
    )
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    assert c.replica.client_quotas == {((C, "good"),): {"producer_byte_rate": 100.0}}


def test_quotas_survive_a_snapshot() -> None:
    c = _cluster()
    _alter(c, [(U, None), (C, None)], QuotaOp("producer_byte_rate", 2048.0), QuotaOp("request_percentage", 50.0))
    _alter(c, [(C, "x")], QuotaOp("controller_mutation_rate", 0.5))
    data = encode_snapshot(c.replica, end_offset=c.replica.offset + 1, epoch=1, timestamp_ms=0)
    _, image = decode_snapshot(data)
    assert image.client_quotas == c.replica.client_quotas
    assert image == c.replica


def test_removing_from_an_unknown_entity_replays_as_a_no_op() -> None:
    image = MetadataImage()
    image.apply(ClientQuotaRecord(((U, "nobody"),), "producer_byte_rate", 0.0, remove=True), 0)
    assert image.client_quotas == {}


# -- DescribeClientQuotas' filter ---------------------------------------------------------------

ENTITIES: list[QuotaEntity] = [
    ((U, "alice"),),
    ((U, None),),
    ((C, "app"),),
    ((C, None),),
    ((C, "app"), (U, "alice")),
    ((C, None), (U, "alice")),
    ((C, "app"), (U, None)),
    ((C, None), (U, None)),
]
QUOTAS = {e: {"producer_byte_rate": float(i + 1)} for i, e in enumerate(ENTITIES)}


def _describe(*components: tuple[str, int, str | None], strict: bool = False) -> set[QuotaEntity]:
    error, message, found = describe_client_quotas(QUOTAS, [FilterComponent(*c) for c in components], strict)
    assert error is ErrorCode.NONE, message
    return {e for e, _ in found}


def test_describe_filters_match_kafkas_semantics() -> None:
    assert _describe() == set(ENTITIES)
    assert _describe(strict=True) == set()
    assert _describe((U, EXACT, "alice")) == {((U, "alice"),), ((C, "app"), (U, "alice")), ((C, None), (U, "alice"))}
    assert _describe((U, EXACT, "alice"), strict=True) == {((U, "alice"),)}
    assert _describe((U, DEFAULT, None), strict=True) == {((U, None),)}
    assert _describe((U, DEFAULT, None), (C, DEFAULT, None)) == {((C, None), (U, None))}
    assert _describe((C, ANY, None), strict=True) == {((C, "app"),), ((C, None),)}
    assert _describe((U, EXACT, "alice"), (C, ANY, None)) == {((C, "app"), (U, "alice")), ((C, None), (U, "alice"))}
    assert _describe((U, EXACT, "bob")) == set()


@pytest.mark.parametrize(
    ("components", "error"),
    [
        ([("", EXACT, "x")], ErrorCode.INVALID_REQUEST),
        ([(U, EXACT, "a"), (U, ANY, None)], ErrorCode.INVALID_REQUEST),
        ([(U, EXACT, None)], ErrorCode.INVALID_REQUEST),
        ([(U, DEFAULT, "a")], ErrorCode.INVALID_REQUEST),
        ([(U, ANY, "a")], ErrorCode.INVALID_REQUEST),
        ([(U, 7, None)], ErrorCode.INVALID_REQUEST),
        ([("ip", ANY, None), (U, ANY, None)], ErrorCode.INVALID_REQUEST),
        ([("group", ANY, None)], ErrorCode.UNSUPPORTED_VERSION),
    ],
)
def test_bad_describe_filters_name_kafkas_error(components: list[tuple[str, int, str | None]], error: ErrorCode) -> None:
    got, message, found = describe_client_quotas(QUOTAS, [FilterComponent(*c) for c in components], False)
    assert got is error
    assert message
    assert found == []


component = st.tuples(st.sampled_from([U, C]), st.sampled_from([EXACT, DEFAULT, ANY]), st.sampled_from(["alice", "app", "x"]))


@given(st.lists(component, max_size=2, unique_by=lambda c: c[0]), st.booleans())
def test_describe_equals_the_definition(raw: list[tuple[str, int, str]], strict: bool) -> None:
    """An entity matches iff every component holds for it (and, strict, it has no other type)."""
    comps = [(t, m, n if m == EXACT else None) for t, m, n in raw]

    def holds(entity: QuotaEntity) -> bool:
        names = dict(entity)
        if strict and len(names) != len(comps):
            return False
        for t, m, n in comps:
            if t not in names or (m == EXACT and names[t] != n) or (m == DEFAULT and names[t] is not None):
                return False
        return True

    assert _describe(*comps, strict=strict) == {e for e in ENTITIES if holds(e)}


def test_one_request_changes_at_most_kafkas_records_per_operation() -> None:
    c = _cluster()
    many = [QuotaAlteration([(C, f"c{i}")], [QuotaOp("producer_byte_rate", 1.0)]) for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    result = c.ctl.alter_client_quotas(many)
    assert result.records == []
    assert {r.error for r in result.response} == {ErrorCode.INVALID_REQUEST}
    # at the bound it is taken (and quickly: duplicates are counted, not searched pairwise)
    result = c.ctl.alter_client_quotas(many[:MAX_RECORDS_PER_USER_OP])
    assert len(result.records) == MAX_RECORDS_PER_USER_OP
