"""Generate `kafkapy/protocol/messages/*.py` and `api_keys.py` from `protocol_specs/`.

Why generated code instead of building classes at import time: typed dataclasses give mypy and
editors real attribute names, and a checked-in file shows in review exactly what changed when a
spec changes. `tests/protocol/test_generated.py` proves regeneration is byte-identical, so the
files can never drift from the specs.

Usage: python tools/gen_messages.py [--check]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkapy.protocol.spec import (  # noqa: E402
    ApiSpec,
    FieldSpec,
    MessageSpec,
    VersionRange,
    parse_spec,
    snake_case,
)

SPEC_DIR = ROOT / "protocol_specs"
OUT_DIR = ROOT / "kafkapy" / "protocol" / "messages"
API_KEYS = ROOT / "kafkapy" / "protocol" / "api_keys.py"

_PY_TYPES = {
    "bool": "bool", "int8": "int", "int16": "int", "int32": "int", "int64": "int",
    "uint16": "int", "uint32": "int", "float64": "float", "uuid": "_uuid.UUID",
    "string": "str", "bytes": "bytes", "records": "bytes | memoryview",
}


def _rng(r: VersionRange | None) -> str:
    return "None" if r is None else f"({r.lo}, {r.hi})"


def _nullable_always(f: FieldSpec) -> bool:
    """Whether the field may be null in every version it exists in (so None is a safe default)."""
    return f.nullable is not None and f.nullable.lo <= f.versions.lo and f.nullable.hi >= f.versions.hi


class _Gen:
    def __init__(self, msg: MessageSpec, api_key: int) -> None:
        self.msg = msg
        self.api_key = api_key
        self.prefix = msg.name
        self.classes: list[str] = []
        self.defined: dict[str, str] = {}
        self.uses_uuid = False

    def struct_fields(self, f: FieldSpec) -> tuple[FieldSpec, ...]:
        if f.fields:
            return f.fields
        common = self.msg.struct(f.element_type)
        if common is None:
            raise SystemExit(f"{self.msg.name}: struct {f.element_type} not defined")
        return common.fields

    def class_name(self, struct: str) -> str:
        return f"{self.prefix}_{struct}"

    def define(self, name: str, fields: tuple[FieldSpec, ...], top: bool = False) -> str:
        cls = self.msg.name if top else self.class_name(name)
        if cls in self.defined:
            return cls
        self.defined[cls] = name
        for f in fields:
            if f.is_struct:
                self.define(f.element_type, self.struct_fields(f))
        doc = (
            f"{cls}: API key {self.api_key}, versions {self.msg.valid.lo}-{self.msg.valid.hi}."
            if top
            else f"The {name} struct of {self.msg.name}."
        )
        lines = ["@_message_class", f"class {cls}:", f'    """{doc}"""', ""]
        if top:
            for cname, sname in self.defined.items():
                if cname != cls:
                    lines.append(f"    {sname} = {cname}")
            if len(self.defined) > 1:
                lines.append("")
        for f in fields:
            lines.append(f"    {f.attr}: {self.annotation(f)} = {self.default(f)}")
        lines.append(
            "    unknown_tagged_fields: dict[int, bytes] = _dc.field(default_factory=dict)"
        )
        lines += self.methods(fields)
        self.classes.append("\n".join(lines))
        return cls

    def methods(self, fields: tuple[FieldSpec, ...]) -> list[str]:
        """`__init__`, `__repr__` and `__eq__` as `dataclasses` writes them for a slotted
        keyword-only class (see `message_class`); hidden from type checkers, which synthesize
        them from the fields."""
        params: list[str] = []
        body: list[str] = []
        for f in fields:
            default = self.default(f)
            factory = {
                "_dc.field(default_factory=list)": "[]",
                "_dc.field(default_factory=dict)": "{}",
            }.get(default)
            if factory is None and default.startswith("_dc.field(default_factory="):
                factory = default.removeprefix("_dc.field(default_factory=")[:-1] + "()"
            if factory is None:
                params.append(f"{f.attr}={default}")
                body.append(f"self.{f.attr} = {f.attr}")
            else:
                params.append(f"{f.attr}=_FACTORY")
                body.append(f"self.{f.attr} = {factory} if {f.attr} is _FACTORY else {f.attr}")
        params.append("unknown_tagged_fields=_FACTORY")
        body.append(
            "self.unknown_tagged_fields = {} if unknown_tagged_fields is _FACTORY "
            "else unknown_tagged_fields"
        )
        attrs = [*(f.attr for f in fields), "unknown_tagged_fields"]
        shown = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
        mine = "".join(f"self.{a}, " for a in attrs).rstrip(" ")
        theirs = "".join(f"other.{a}, " for a in attrs).rstrip(" ")
        return [
            "",
            "    if not TYPE_CHECKING:",
            "",
            f"        def __init__(self, *, {', '.join(params)}):",
            *(f"            {line}" for line in body),
            "",
            "        def __repr__(self):",
            f'            return f"{{self.__class__.__qualname__}}({shown})"',
            "",
            "        def __eq__(self, other):",
            "            if other.__class__ is self.__class__:",
            f"                return ({mine}) == ({theirs})",
            "            return NotImplemented",
        ]

    def annotation(self, f: FieldSpec) -> str:
        if f.is_struct:
            base = self.class_name(f.element_type)
        else:
            base = _PY_TYPES[f.element_type]
            if f.element_type == "uuid":
                self.uses_uuid = True
        ann = f"list[{base}]" if f.is_array else base
        if f.nullable is not None or f.default == "null":
            ann += " | None"
        return ann

    def default(self, f: FieldSpec) -> str:
        d = f.default
        if d == "null" or (d is None and _nullable_always(f) and f.type != "records"):
            return "None"
        if f.is_array:
            return "_dc.field(default_factory=list)"
        if f.is_struct:
            return f"_dc.field(default_factory={self.class_name(f.element_type)})"
        t = f.type
        if t == "bool":
            return "True" if d == "true" else "False"
        if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return str(int(d, 0)) if d else "0"
        if t == "float64":
            return repr(float(d)) if d else "0.0"
        if t == "string":
            return repr(d or "")
        if t in ("bytes", "records"):
            return 'b""'
        if t == "uuid":
            self.uses_uuid = True
            return "_uuid.UUID(int=0)"
        raise SystemExit(f"unknown type {t}")

    def table(self, fields: tuple[FieldSpec, ...], cls: str, indent: int) -> str:
        pad = " " * indent
        rows = []
        for f in fields:
            args = [
                repr(f.attr),
                repr("struct" if f.is_struct else f.element_type),
                repr(f.is_array),
                _rng(f.versions),
                _rng(f.nullable),
                repr(f.tag),
                _rng(f.tagged),
            ]
            if f.is_struct:
                sub = self.table(self.struct_fields(f), self.class_name(f.element_type), indent + 4)
                args.append(sub)
            elif f.flexible_override:
                args.append("None")
            if f.flexible_override:
                args += [_rng(f.flexible), "True"]
            rows.append(f"{pad}    F({', '.join(args)}),")
        body = "\n".join(rows)
        return f"S({cls}, (\n{body}\n{pad}))" if rows else f"S({cls}, ())"


def generate(api: ApiSpec, spec_text: str, spec_file: str) -> str:
    digest = hashlib.sha256(spec_text.encode()).hexdigest()[:12]
    parts: list[str] = []
    tables: list[str] = []
    uses_uuid = False
    for msg in (api.request, api.response):
        g = _Gen(msg, api.key)
        g.define(msg.name, msg.fields, top=True)
        parts.extend(g.classes)
        uses_uuid = uses_uuid or g.uses_uuid
        tables.append(
            f"MessageDef({_rng(msg.valid)}, {_rng(msg.flexible)}, "
            f"{g.table(msg.fields, msg.name, 4)})"
        )
    header = [
        f"# Generated by tools/gen_messages.py from protocol_specs/{spec_file} "
        f"({digest}). DO NOT EDIT.",
        f'"""{api.name} (API key {api.key}): request/response dataclasses and schema tables."""',
        "",
        "from __future__ import annotations",
        "",
        "import dataclasses as _dc",
    ]
    if uses_uuid:
        header.append("import uuid as _uuid")
    header += [
        "from typing import TYPE_CHECKING",
        "",
        "from kafkapy.protocol.schema import FACTORY as _FACTORY",
        "from kafkapy.protocol.schema import ApiDef, F, MessageDef, S",
        "from kafkapy.protocol.schema import message_class as _message_class",
        "",
        f'__all__ = ["SCHEMA", "{api.request.name}", "{api.response.name}"]',
        "",
    ]
    schema = (
        f"SCHEMA = ApiDef(\n    {api.key},\n    {api.name!r},\n    "
        + ",\n    ".join(tables)
        + ",\n)"
    )
    return "\n".join(header) + "\n\n" + "\n\n\n".join(parts) + "\n\n\n" + schema + "\n"


_INIT_DOC = '''"""Every message class, one module per API, each imported on first use (PEP 562).

Why lazy: building an API's dataclasses at import costs milliseconds, ~0.3 s for all of them, and
most processes (`kafkapy --help`, a client command, a broker serving a few APIs) use a handful.
`from kafkapy.protocol.messages import ProduceRequest` loads `produce` alone; `SCHEMAS[key]`
loads that key's module; `APIS` holds each API's versions without loading anything (the codec's
version tables and header rules use it). Type checkers see ordinary imports (TYPE_CHECKING).
"""'''

_INIT_GETATTR = '''
_MODULES: dict[str, str] = {
    f"{info.name}{kind}": info.module for info in APIS.values() for kind in ("Request", "Response")
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _MODULES.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})

'''


def _package_init(apis: list[tuple[str, ApiSpec]]) -> str:
    """messages/__init__.py: the version table, the lazy SCHEMAS and the class loader."""
    init = [
        "# Generated by tools/gen_messages.py from protocol_specs/. DO NOT EDIT.",
        _INIT_DOC,
        "",
        "# ruff: noqa: I001, E501",
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "from typing import TYPE_CHECKING",
        "",
        "from kafkapy.protocol.schema import ApiInfo, ApiSchemas",
        "",
        "if TYPE_CHECKING:",
    ]
    names: list[str] = []
    for module, api in sorted(apis, key=lambda item: item[0]):
        if (api.request.name, api.response.name) != (f"{api.name}Request", f"{api.name}Response"):
            raise SystemExit(f"{api.name}: message names must be {api.name}Request/Response")
        if api.request.valid != api.response.valid:
            raise SystemExit(f"{api.name}: request and response versions differ")
        init.append(
            f"    from kafkapy.protocol.messages.{module} import "
            f"{api.request.name}, {api.response.name}"
        )
        names += [api.request.name, api.response.name]
    init += ["", "#: API key -> its versions; reading this loads no API module.", "APIS: dict[int, ApiInfo] = {"]
    init += [
        f"    {api.key}: ApiInfo({api.key}, {api.name!r}, {module!r}, {_rng(api.request.valid)}, "
        f"{_rng(api.request.flexible)}, {_rng(api.response.flexible)}),"
        for module, api in apis
    ]
    init += [
        "}",
        "",
        "#: API key -> schema table; a key's module is imported when the key is first read.",
        "SCHEMAS = ApiSchemas(__name__, APIS)",
        _INIT_GETATTR,
        "__all__ = [",
    ]
    init += [f'    "{n}",' for n in sorted([*names, "APIS", "SCHEMAS"])]
    init += ["]", ""]
    return "\n".join(init)


def generate_all() -> dict[Path, str]:
    """Every generated file keyed by its path (used by the regeneration test)."""
    out: dict[Path, str] = {}
    apis: list[tuple[str, ApiSpec]] = []
    for path in sorted(SPEC_DIR.glob("*.spec")):
        if path.name == "headers.spec":
            continue
        text = path.read_text()
        api = parse_spec(text)
        module = snake_case(api.name)
        out[OUT_DIR / f"{module}.py"] = generate(api, text, path.name)
        apis.append((module, api))
    apis.sort(key=lambda item: item[1].key)
    out[OUT_DIR / "__init__.py"] = _package_init(apis)
    keys = [
        "# Generated by tools/gen_messages.py from protocol_specs/. DO NOT EDIT.",
        '"""Kafka API keys (`ApiKey.PRODUCE == 0`), named as UPPER_SNAKE of the API name."""',
        "",
        "from __future__ import annotations",
        "",
        "import enum",
        "",
        '__all__ = ["ApiKey"]',
        "",
        "",
        "class ApiKey(enum.IntEnum):",
        '    """The API keys this codec speaks."""',
        "",
    ]
    keys += [f"    {snake_case(api.name).upper()} = {api.key}" for _, api in apis]
    out[API_KEYS] = "\n".join(keys) + "\n"
    return out


def main(argv: list[str]) -> int:
    files = generate_all()
    if "--check" in argv:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)}")
        return 1 if stale else 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
