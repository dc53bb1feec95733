"""Spec linter: the structural rules Kafka's own schema checker enforces, applied to our files.

A spec edit that breaks one of these would generate a codec that silently mis-frames some
version; catching it here keeps hand edits of `protocol_specs/` safe.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.spec import (
    MAX_VERSION,
    PRIMITIVE_TYPES,
    FieldSpec,
    MessageSpec,
    SpecError,
    parse_range,
    parse_spec,
)

from .specs import load_api_specs, load_header_specs

MESSAGES = [m for api in load_api_specs() for m in (api.request, api.response)]


def _within(inner: object, outer: object) -> bool:
    return inner is None or (
        outer is not None
        and outer.lo <= inner.lo  # type: ignore[attr-defined]
        and inner.hi <= outer.hi  # type: ignore[attr-defined]
    )


def _lint(msg: MessageSpec, fields: tuple[FieldSpec, ...], where: str) -> None:
    tags = [f.tag for f in fields if f.tag is not None]
    assert len(tags) == len(set(tags)), f"{where}: duplicate tags {tags}"
    names = [f.name for f in fields]
    assert len(names) == len(set(names)), f"{where}: duplicate field names"
    for f in fields:
        at = f"{where}.{f.name}"
        assert f.versions.lo <= f.versions.hi, at
        assert f.versions.lo <= msg.valid.hi, f"{at}: starts after the last valid version"
        # Kafka itself declares some nullable ranges wider than the field (e.g. "0+" on a
        # field added in v1); only the overlap matters, but there must be one.
        if f.nullable is not None:
            assert f.nullable.lo <= f.versions.hi, at
            assert f.versions.lo <= f.nullable.hi, at
        assert _within(f.tagged, f.versions), f"{at}: tagged outside field versions"
        assert (f.tag is None) == (f.tagged is None), f"{at}: tag and tagged go together"
        if f.tagged is not None:
            assert _within(f.tagged, msg.flexible), f"{at}: tagged in non-flexible versions"
        if f.nullable is not None:
            assert f.is_array or f.is_struct or f.type in ("string", "bytes", "records"), at
        if f.is_struct:
            assert f.fields or msg.struct(f.element_type) is not None, f"{at}: undefined struct"
            _lint(msg, f.fields, at)
        else:
            assert f.element_type in PRIMITIVE_TYPES, f"{at}: unknown type {f.type}"


@pytest.mark.parametrize("msg", MESSAGES, ids=[m.name for m in MESSAGES])
def test_spec_is_sane(msg: MessageSpec) -> None:
    assert 0 <= msg.valid.lo <= msg.valid.hi < MAX_VERSION
    _lint(msg, msg.fields, msg.name)
    for struct in msg.structs:
        _lint(msg, struct.fields, f"{msg.name}.{struct.name}")


def test_headers_are_sane() -> None:
    for msg in load_header_specs().values():
        _lint(msg, msg.fields, msg.name)


@pytest.mark.parametrize(
    "text",
    [
        "api 1 X\nrequest versions=0 flexible=none\n  A int8\nresponse versions=0 flexible=none\n",
        "api 1 X\nrequest versions=0 flexible=none\n  A int8 v0+ bogus=1\n"
        "response versions=0 flexible=none\n",
        "api 1 X\nrequest versions=3-1 flexible=none\nresponse versions=0 flexible=none\n",
        "api 1 X\nrequest versions=0 flexible=none\n   A int8 v0+\nresponse versions=0 flexible=none\n",
        "request versions=0 flexible=none\n",
    ],
)
def test_parser_rejects_malformed_specs(text: str) -> None:
    with pytest.raises(SpecError):
        parse_spec(text)


def test_ranges() -> None:
    assert parse_range("none") is None
    r = parse_range("3+")
    assert r is not None
    assert 3 in r
    assert MAX_VERSION in r
    assert 2 not in r
    assert str(parse_range("3-8")) == "3-8"
    assert str(parse_range("4")) == "4"


VALID = (
    "api 12 Heartbeat\nrequest versions=0-4 flexible=4+\n  GroupId string v0+\n"
    "response versions=0-4 flexible=4+\n  ErrorCode int16 v0+ default=\"0\"\n"
)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_parser_raises_only_spec_error(data: st.DataObject) -> None:
    # Hand-edited specs must fail with a clear SpecError, never a stray KeyError/IndexError.
    pos = data.draw(st.integers(0, len(VALID)), label="pos")
    junk = data.draw(st.text(alphabet=" =+-\n\"abv0123[]", max_size=6), label="junk")
    cut = data.draw(st.integers(pos, len(VALID)), label="cut")
    text = VALID[:pos] + junk + VALID[cut:]
    try:
        api = parse_spec(text)
    except SpecError:
        return
    assert api.name


def test_valid_example_parses() -> None:
    api = parse_spec(VALID)
    assert (api.key, api.name) == (12, "Heartbeat")
    assert api.response.fields[0].default == "0"
