"""Every generated message class behaves as the plain slotted keyword-only dataclass of its
fields: same constructor (names, keyword-only, defaults, fresh factory values, an explicit None
kept), same repr, same equality, unhashable, slotted, and `dataclasses` helpers work.

Why: the generator writes `__init__`/`__repr__`/`__eq__` out instead of letting `dataclasses`
compile them at import (`kafkapy.protocol.schema.message_class`); handlers, the codec and the
tests compare and print these objects, so the written-out methods must be the same ones.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

from kafkapy.protocol.messages import SCHEMAS
from kafkapy.protocol.schema import FACTORY, S


def _structs(s: S) -> Iterator[type[Any]]:
    yield s.cls
    for f in s.fields:
        if f.struct is not None:
            yield from _structs(f.struct)


CLASSES = sorted(
    {cls for api in SCHEMAS.values() for m in (api.request, api.response) for cls in _structs(m.struct)},
    key=lambda c: c.__name__,
)


def _reference(cls: type[Any]) -> type[Any]:
    """What `@dataclass(slots=True, kw_only=True)` makes of the same fields."""
    specs = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            specs.append((f.name, f.type, dataclasses.field(default_factory=f.default_factory)))
        else:
            specs.append((f.name, f.type, dataclasses.field(default=f.default)))
    ref: type[Any] = dataclasses.make_dataclass(cls.__name__, specs, slots=True, kw_only=True)
    ref.__qualname__ = cls.__qualname__
    return ref


def test_every_class_is_checked() -> None:
    assert len(CLASSES) > 300


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_a_message_class_is_its_plain_dataclass(cls: type[Any]) -> None:
    ref = _reference(cls)
    fields = dataclasses.fields(cls)
    assert [f.name for f in fields][-1] == "unknown_tagged_fields"
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        expected = FACTORY if f.default_factory is not dataclasses.MISSING else f.default
        assert p.default is expected or p.default == expected, f.name

    a, b, r = cls(), cls(), ref()
    for f in fields:
        assert getattr(a, f.name) == getattr(r, f.name), f.name
        if f.default_factory is not dataclasses.MISSING:
            assert getattr(a, f.name) is not getattr(b, f.name), f"{f.name} shared between instances"
    assert repr(a) == repr(r)
    assert a == b
    assert not a != b  # noqa: SIM202
    assert a != r  # another class is never equal, as with dataclasses
    assert a != object()
    with pytest.raises(TypeError):
        hash(a)
    assert not hasattr(a, "__dict__")
    assert dataclasses.asdict(a) == dataclasses.asdict(r)

    # every field is passed through, compared and shown; an explicit None is kept
    for f in fields:
        value: Any = None if f.default_factory is not dataclasses.MISSING else object()
        changed = cls(**{f.name: value})
        assert getattr(changed, f.name) is value
        assert changed != a, f.name
        assert dataclasses.replace(a, **{f.name: value}) == changed
        assert f"{f.name}={value!r}" in repr(changed)
        assert repr(changed) == repr(ref(**{f.name: value}))
