"""Test helpers: load the project's spec files (tests may read files; the package may not)."""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol.spec import ApiSpec, MessageSpec, parse_headers, parse_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "protocol_specs"
REFERENCE_DIR = Path("/work/shared/kafka-protocol/message")


def load_api_specs() -> list[ApiSpec]:
    return [
        parse_spec(p.read_text())
        for p in sorted(SPEC_DIR.glob("*.spec"))
        if p.name != "headers.spec"
    ]


def load_header_specs() -> dict[str, MessageSpec]:
    return parse_headers((SPEC_DIR / "headers.spec").read_text())
