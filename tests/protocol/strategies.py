"""Hypothesis strategies that build valid messages from the generated schema tables.

Why from the schema and not hand-written: every (API, version, direction) gets coverage for free,
including fields that only exist in some versions, nullability per version and tagged fields.
Fields absent from the drawn version keep their defaults, which is exactly what a decoder
produces for them, so `decode(encode(m)) == m` must hold for every drawn message.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from kafkapy.protocol.messages import SCHEMAS
from kafkapy.protocol.schema import F, MessageDef, S, in_range

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def all_versions() -> list[tuple[int, int, bool]]:
    """Every (api_key, version, is_request) the codec speaks."""
    out = []
    for key, api in sorted(SCHEMAS.items()):
        for request, mdef in ((True, api.request), (False, api.response)):
            out += [(key, v, request) for v in range(mdef.valid[0], mdef.valid[1] + 1)]
    return out


def message_def(api_key: int, request: bool) -> MessageDef:
    api = SCHEMAS[api_key]
    return api.request if request else api.response


def _primitive(type_: str) -> st.SearchStrategy[Any]:
    if type_ in INT_RANGES:
        lo, hi = INT_RANGES[type_]
        return st.integers(lo, hi)
    if type_ == "bool":
        return st.booleans()
    if type_ == "float64":
        return st.floats(allow_nan=False)
    if type_ == "uuid":
        return st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
    if type_ == "string":
        return st.text(max_size=6)
    if type_ in ("bytes", "records"):
        return st.binary(max_size=12)
    raise AssertionError(type_)


def field_strategy(
    f: F, version: int, flexible: bool, depth: int, unknown_tags: bool = True
) -> st.SearchStrategy[Any]:
    if f.type == "struct":
        assert f.struct is not None
        base = struct_strategy(f.struct, version, flexible, depth + 1, unknown_tags)
    else:
        base = _primitive(f.type)
    if f.array:
        base = st.lists(base, max_size=3 if depth < 2 else 1)
    if in_range(version, f.nullable):
        base = st.none() | base
    return base


def present_fields(sdef: S, version: int, flexible: bool) -> list[F]:
    return [
        f
        for f in sdef.fields
        if in_range(version, f.versions)
        or (flexible and f.tag is not None and in_range(version, f.tagged))
    ]


def struct_strategy(
    sdef: S, version: int, flexible: bool, depth: int = 0, unknown_tags: bool = True
) -> st.SearchStrategy[Any]:
    fields = present_fields(sdef, version, flexible)
    kwargs: dict[str, st.SearchStrategy[Any]] = {
        f.attr: field_strategy(f, version, flexible, depth, unknown_tags) for f in fields
    }
    if flexible and unknown_tags:
        known = {f.tag for f in fields if f.tag is not None and in_range(version, f.tagged)}
        kwargs["unknown_tagged_fields"] = st.dictionaries(
            st.integers(0, 40).filter(lambda t: t not in known), st.binary(max_size=6), max_size=2
        )
    return st.fixed_dictionaries(kwargs).map(lambda kw: sdef.cls(**kw))


def message_strategy(
    api_key: int, version: int, request: bool, *, unknown_tags: bool = True
) -> st.SearchStrategy[Any]:
    """Valid messages; `unknown_tags=False` for peers that drop tags they do not know."""
    mdef = message_def(api_key, request)
    return struct_strategy(mdef.struct, version, in_range(version, mdef.flexible), 0, unknown_tags)
