"""Test helpers: load the project's spec files (tests may read files; the package may not)."""

from __future__ import annotations

from pathlib import Path

from kafkapy.protocol.spec import ApiSpec, MessageSpec, parse_headers, parse_spec
from tests.kafka_reference import kafka_reference

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "protocol_specs"


def load_api_specs() -> list[ApiSpec]:
    return [
        parse_spec(p.read_text())
        for p in sorted(SPEC_DIR.glob("*.spec"))
        if p.name != "headers.spec"
    ]


def load_header_specs() -> dict[str, MessageSpec]:
    return parse_headers((SPEC_DIR / "headers.spec").read_text())


def reference_dir() -> Path:
    """Kafka's message definitions (`tests/kafka_reference.py`: fails under CI when missing)."""
    return kafka_reference("message")
