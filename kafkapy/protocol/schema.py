"""Compact schema tables the generated `messages/` modules export and the codec compiles.

Why tables and not the spec model: the codec must not read `protocol_specs/` at import time
(the installed package does not ship it), so the generator bakes each API's wire facts into
small immutable tuples next to the dataclasses they describe. Field defaults are not repeated
here: the codec reads them from a default-constructed instance of the class.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ApiDef", "F", "MessageDef", "S", "Versions"]

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


def in_range(version: int, rng: Versions | None) -> bool:
    """True when `version` lies in the inclusive range (None = no versions)."""
    return rng is not None and rng[0] <= version <= rng[1]
