"""The project's wire-spec format: parse `protocol_specs/*.spec` text into a plain data model.

Why a format of our own: the specs are the single source of truth for the codec (via the
generated `messages/` modules), so they must be ours, compact and diff-friendly, and carry wire
facts only. The model here is pure data (no I/O): tools and tests read the files and pass the
text in, keeping the protocol layer free of file access.

Format (indentation = nesting, two spaces per level)::

    api <key> <Name>
    request versions=<range> flexible=<range|none>
      <Field> <type> v<range> [null=<range>] [tag=<n>] [tagged=<range>]
                               [flexible=<range|none>] [default="<json string>"]
        <nested fields of a struct or struct array>
      struct <Name> v<range>          # a shared struct referenced by type name
        <its fields>
    response versions=... flexible=...
      ...

Headers live in `headers.spec` as `header <Name> versions=... flexible=...` sections.
Ranges are `N`, `N+`, `N-M` or `none`, as in Kafka's own notation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

__all__ = [
    "MAX_VERSION",
    "ApiSpec",
    "FieldSpec",
    "MessageSpec",
    "SpecError",
    "StructSpec",
    "VersionRange",
    "parse_headers",
    "parse_range",
    "parse_spec",
    "snake_case",
]

#: Upper bound standing in for an open range ("3+").
MAX_VERSION = 0x7FFF

PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "uuid",
     "string", "bytes", "records"}
)


class SpecError(ValueError):
    """A spec file that does not follow the format (a development-time error)."""


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Inclusive version range; `hi == MAX_VERSION` means open-ended."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


def parse_range(text: str) -> VersionRange | None:
    """`"3+"`, `"3-8"`, `"3"` -> VersionRange; `"none"` -> None."""
    if text == "none":
        return None
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", text)
    if m is None:
        raise SpecError(f"bad version range {text!r}")
    lo = int(m.group(1))
    if m.group(2) == "+":
        return VersionRange(lo, MAX_VERSION)
    hi = int(m.group(3)) if m.group(3) is not None else lo
    if hi < lo:
        raise SpecError(f"empty version range {text!r}")
    return VersionRange(lo, hi)


def snake_case(name: str) -> str:
    """Mechanical snake_case of a spec name: `ThrottleTimeMs` -> `throttle_time_ms`."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One field as written in a spec file (`default` is the raw text, None when absent)."""

    name: str
    type: str
    versions: VersionRange
    nullable: VersionRange | None = None
    tag: int | None = None
    tagged: VersionRange | None = None
    flexible: VersionRange | None = None
    flexible_override: bool = False
    default: str | None = None
    fields: tuple[FieldSpec, ...] = ()

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVE_TYPES

    @property
    def attr(self) -> str:
        return snake_case(self.name)


@dataclass(frozen=True, slots=True)
class StructSpec:
    """A named struct shared by several fields (Kafka's "commonStructs")."""

    name: str
    versions: VersionRange
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """A request, response or header: its version ranges and fields."""

    name: str
    valid: VersionRange
    flexible: VersionRange | None
    fields: tuple[FieldSpec, ...]
    structs: tuple[StructSpec, ...] = ()

    def struct(self, name: str) -> StructSpec | None:
        for s in self.structs:
            if s.name == name:
                return s
        return None


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: key, name (`Produce`), request and response."""

    key: int
    name: str
    request: MessageSpec
    response: MessageSpec


@dataclass(slots=True)
class _Node:
    indent: int
    tokens: list[str]
    children: list[_Node] = field(default_factory=list)


def _tree(text: str) -> list[_Node]:
    root = _Node(-1, [])
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        node = _Node(indent, line.split())
        while stack[-1].indent >= indent:
            stack.pop()
        if stack[-1].indent != -1 and indent != stack[-1].indent + 2:
            raise SpecError(f"line {lineno}: bad indentation")
        stack[-1].children.append(node)
        stack.append(node)
    return root.children


def _options(tokens: list[str]) -> dict[str, str]:
    opts: dict[str, str] = {}
    for tok in tokens:
        key, sep, value = tok.partition("=")
        if not sep:
            raise SpecError(f"expected key=value, got {tok!r}")
        opts[key] = value
    return opts


def _field(node: _Node) -> FieldSpec:
    if len(node.tokens) < 3 or not node.tokens[2].startswith("v"):
        raise SpecError(f"bad field line {' '.join(node.tokens)!r}")
    name, type_, vtext = node.tokens[0], node.tokens[1], node.tokens[2][1:]
    opts = _options(node.tokens[3:])
    versions = parse_range(vtext)
    if versions is None:
        raise SpecError(f"field {name} has no versions")
    unknown = set(opts) - {"null", "tag", "tagged", "flexible", "default"}
    if unknown:
        raise SpecError(f"field {name}: unknown options {sorted(unknown)}")
    default = json.loads(opts["default"]) if "default" in opts else None
    if default is not None and not isinstance(default, str):
        raise SpecError(f"field {name}: default must be a quoted string")
    return FieldSpec(
        name=name,
        type=type_,
        versions=versions,
        nullable=parse_range(opts["null"]) if "null" in opts else None,
        tag=int(opts["tag"]) if "tag" in opts else None,
        tagged=parse_range(opts["tagged"]) if "tagged" in opts else None,
        flexible=parse_range(opts["flexible"]) if "flexible" in opts else None,
        flexible_override="flexible" in opts,
        default=default,
        fields=tuple(_field(child) for child in node.children),
    )


def _message(name: str, node: _Node) -> MessageSpec:
    opts = _options(node.tokens[1:])
    valid = parse_range(opts["versions"])
    if valid is None:
        raise SpecError(f"{name}: no valid versions")
    fields: list[FieldSpec] = []
    structs: list[StructSpec] = []
    for child in node.children:
        if child.tokens[0] == "struct":
            srange = parse_range(child.tokens[2][1:])
            if srange is None:
                raise SpecError(f"struct {child.tokens[1]} has no versions")
            structs.append(
                StructSpec(child.tokens[1], srange, tuple(_field(c) for c in child.children))
            )
        else:
            fields.append(_field(child))
    return MessageSpec(name, valid, parse_range(opts["flexible"]), tuple(fields), tuple(structs))


def parse_spec(text: str) -> ApiSpec:
    """Parse one API's spec file; any malformation raises `SpecError`."""
    try:
        return _parse_spec(text)
    except SpecError:
        raise
    except (KeyError, IndexError, ValueError) as e:
        raise SpecError(f"malformed spec: {type(e).__name__}: {e}") from None


def _parse_spec(text: str) -> ApiSpec:
    nodes = _tree(text)
    if len(nodes) != 3 or nodes[0].tokens[0] != "api" or len(nodes[0].tokens) != 3:
        raise SpecError("expected 'api <key> <Name>', 'request ...' and 'response ...'")
    key, name = int(nodes[0].tokens[1]), nodes[0].tokens[2]
    if nodes[1].tokens[0] != "request" or nodes[2].tokens[0] != "response":
        raise SpecError(f"{name}: sections must be 'request' then 'response'")
    return ApiSpec(
        key, name, _message(name + "Request", nodes[1]), _message(name + "Response", nodes[2])
    )


def parse_headers(text: str) -> dict[str, MessageSpec]:
    """Parse `headers.spec`: `{"RequestHeader": ..., "ResponseHeader": ...}`."""
    try:
        return _parse_headers(text)
    except SpecError:
        raise
    except (KeyError, IndexError, ValueError) as e:
        raise SpecError(f"malformed headers spec: {type(e).__name__}: {e}") from None


def _parse_headers(text: str) -> dict[str, MessageSpec]:
    out: dict[str, MessageSpec] = {}
    for node in _tree(text):
        if node.tokens[0] != "header" or len(node.tokens) < 2:
            raise SpecError("expected 'header <Name> versions=... flexible=...'")
        sub = _Node(node.indent, node.tokens[1:], node.children)
        out[node.tokens[1]] = _message(node.tokens[1], sub)
    return out
