"""Compact schema tables the generated `messages/` modules export and the codec compiles.

Why tables and not the spec model: the codec must not read `protocol_specs/` at import time
(the installed package does not ship it), so the generator bakes each API's wire facts into
small immutable tuples next to the dataclasses they describe. Field defaults are not repeated
here: the codec reads them from a default-constructed instance of the class.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, TypeVar, dataclass_transform

__all__ = [
    "FACTORY",
    "ApiDef",
    "ApiInfo",
    "ApiSchemas",
    "F",
    "MessageDef",
    "S",
    "Versions",
    "message_class",
]

_T = TypeVar("_T")

#: The default of a generated `__init__` parameter whose field has a default factory (as the
#: `dataclasses` sentinel: an explicit None stays None).
FACTORY: Any = object()


@dataclass_transform(kw_only_default=True, field_specifiers=(dataclasses.field,))
def message_class(cls: type[_T]) -> type[_T]:
    """A generated message class: a slotted, keyword-only dataclass whose `__init__`, `__repr__`
    and `__eq__` are written out in the generated module (the ones `dataclasses` would make).

    Why: `dataclasses` builds those three by compiling source text for every class at import
    (bytecode caching cannot help), ~0.8 ms a class, ~0.25 s for the ~320 message classes;
    written out they are compiled once into the .pyc. Fields, `dataclasses.fields()`,
    `replace()` and `asdict()` are as before. tests/protocol/test_message_classes.py checks
    each class against the plain dataclass of the same fields.
    """
    return dataclasses.dataclass(cls, slots=True, kw_only=True, init=False, repr=False, eq=False)

Versions = tuple[int, int]


class S(NamedTuple):
    """A struct: the dataclass it maps to and its fields in wire order."""

    cls: type[Any]
    fields: tuple[F, ...]


class F(NamedTuple):
    """One field. `type` is a primitive name or "struct"; `array` marks `[]type`."""

    attr: str
    type: str
    array: bool
    versions: Versions
    nullable: Versions | None = None
    tag: int | None = None
    tagged: Versions | None = None
    struct: S | None = None
    #: Versions in which this field uses compact (flexible) encodings; None = follow message.
    flexible: Versions | None = None
    flexible_override: bool = False


class MessageDef(NamedTuple):
    """A request or response: valid and flexible version ranges plus the top-level struct."""

    valid: Versions
    flexible: Versions | None
    struct: S


class ApiDef(NamedTuple):
    """One API key with both directions."""

    key: int
    name: str
    request: MessageDef
    response: MessageDef


class ApiInfo(NamedTuple):
    """One API's version facts, without its classes: what the codec's version tables and the
    header rules need, so that they can be built before (or without) loading the API's module.
    `module` names the generated module under `kafkapy.protocol.messages`."""

    key: int
    name: str
    module: str
    valid: Versions
    request_flexible: Versions | None
    response_flexible: Versions | None


def in_range(version: int, rng: Versions | None) -> bool:
    """True when `version` lies in the inclusive range (None = no versions)."""
    return rng is not None and rng[0] <= version <= rng[1]


class ApiSchemas(Mapping[int, ApiDef]):
    """API key -> `ApiDef`, importing an API's generated module when its key is first read.

    Why lazy: building one API's dataclasses costs milliseconds and there are ~60 APIs, so
    importing them all made every process that touched the protocol pay ~0.3 s at start; a
    process now pays only for the APIs it uses. Iterating yields the keys without loading.
    """

    __slots__ = ("_apis", "_loaded", "_package")

    def __init__(self, package: str, apis: Mapping[int, ApiInfo]) -> None:
        self._package = package
        self._apis = apis
        self._loaded: dict[int, ApiDef] = {}

    def __getitem__(self, key: int) -> ApiDef:
        schema = self._loaded.get(key)
        if schema is None:
            info = self._apis[key]  # KeyError for an unknown key, as a dict
            module = importlib.import_module(f"{self._package}.{info.module}")
            schema = self._loaded[key] = module.SCHEMA
        return schema

    def __iter__(self) -> Iterator[int]:
        return iter(self._apis)

    def __len__(self) -> int:
        return len(self._apis)

    def __contains__(self, key: object) -> bool:
        return key in self._apis
