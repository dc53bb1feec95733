"""kafkapy.protocol.crc: the crc32c package's C function, loaded without the package's
__init__ (which reads distribution metadata at import)."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys

import crc32c as crc32c_package
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol import crc


def test_check_value() -> None:
    # the CRC-32C check value of "123456789" (RFC 3720 B.4 / the Castagnoli catalogue)
    assert crc.crc32c(b"123456789") == 0xE3069283
    assert crc.crc32c(b"") == 0


@given(st.binary(max_size=4096), st.integers(0, 64))
def test_matches_the_package_on_any_buffer(data: bytes, skip: int) -> None:
    expected = crc32c_package.crc32c(data[skip:])
    assert crc.crc32c(data[skip:]) == expected
    assert crc.crc32c(memoryview(data)[skip:]) == expected
    assert crc.crc32c(bytearray(data)[skip:]) == expected


def test_loading_reads_no_distribution_metadata_and_the_package_still_imports() -> None:
    code = (
        "import json, sys\n"
        "import kafkapy.protocol.records\n"
        "before = sorted(m for m in ('crc32c', 'importlib.metadata', 'argparse') if m in sys.modules)\n"
        "import crc32c\n"
        "from kafkapy.protocol.crc import crc32c as ours\n"
        "print(json.dumps([before, crc32c.crc32c is ours, ours(b'123456789')]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    before, same, check = json.loads(result.stdout.strip().splitlines()[-1])
    assert before == []
    assert same  # the package reuses the extension module loaded first
    assert check == 0xE3069283


def test_falls_back_to_the_package_when_the_extension_is_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def not_found(_cls: object, name: str, *_args: object) -> None:
        asked.append(name)

    monkeypatch.delitem(sys.modules, "crc32c._crc32c")
    monkeypatch.setattr(importlib.machinery.PathFinder, "find_spec", classmethod(not_found))
    loaded = crc._load()
    assert asked == ["crc32c._crc32c"]
    assert loaded is crc32c_package.crc32c
    assert loaded(b"123456789") == 0xE3069283
