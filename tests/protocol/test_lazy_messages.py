"""The message classes are loaded per API on first use, and each loads whole and consistent.

What users rely on: every API's classes are reachable under their usual names (from
`kafkapy.protocol.messages` and from `kafkapy.protocol`), `SCHEMAS` and `APIS` agree, and a
process pays only for the APIs it touches (checked in fresh interpreters by which generated
modules ended up in `sys.modules`).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import kafkapy.protocol
from kafkapy.protocol import ApiKey, messages
from kafkapy.protocol.messages import APIS, SCHEMAS


def test_the_tables_name_every_api_key() -> None:
    assert set(APIS) == set(SCHEMAS) == {int(k) for k in ApiKey}
    assert len(SCHEMAS) == len(ApiKey)


@pytest.mark.parametrize("key", sorted(ApiKey), ids=lambda k: ApiKey(k).name)
def test_every_api_key_loads_its_classes(key: ApiKey) -> None:
    info = APIS[key]
    schema = SCHEMAS[key]
    module = importlib.import_module(f"kafkapy.protocol.messages.{info.module}")
    assert schema is module.SCHEMA
    assert (schema.key, schema.name) == (info.key, info.name) == (key, schema.name)
    assert schema.request.valid == schema.response.valid == info.valid
    assert schema.request.flexible == info.request_flexible
    assert schema.response.flexible == info.response_flexible
    for kind, mdef in (("Request", schema.request), ("Response", schema.response)):
        name = f"{info.name}{kind}"
        cls = getattr(messages, name)
        assert cls is mdef.struct.cls is getattr(module, name) is getattr(kafkapy.protocol, name)
        assert name in messages.__all__
        assert name in kafkapy.protocol.__all__
        cls()  # every field has a default


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchRequest"):
        messages.NoSuchRequest  # noqa: B018
    with pytest.raises(AttributeError, match="NoSuchRequest"):
        kafkapy.protocol.NoSuchRequest  # noqa: B018
    with pytest.raises(ImportError):
        from kafkapy.protocol.messages import NoSuchResponse  # noqa: F401
    with pytest.raises(KeyError):
        SCHEMAS[4]  # LeaderAndIsr: not an API this codec speaks
    assert SCHEMAS.get(4) is None
    assert 4 not in SCHEMAS
    assert 0 in SCHEMAS


def test_star_import_and_dir_list_every_name() -> None:
    namespace: dict[str, object] = {}
    exec("from kafkapy.protocol import *", namespace)
    assert set(kafkapy.protocol.__all__) <= set(namespace)
    assert set(messages.__all__) <= set(dir(messages))
    assert {"ProduceRequest", "decode_request", "SUPPORTED_VERSIONS"} <= set(dir(kafkapy.protocol))


def _loaded_apis(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; the generated API modules it imported."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules "
        "if m.startswith('kafkapy.protocol.messages.'))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    loaded: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_protocol_builds_no_message_class() -> None:
    loaded = _loaded_apis(
        "import kafkapy.protocol, kafkapy.protocol.messages, kafkapy.protocol.errors\n"
        "from kafkapy.protocol.messages import APIS, SCHEMAS\n"
        "from kafkapy.protocol import ApiKey, ErrorCode, ProtocolError\n"
        "assert len(SCHEMAS) == len(APIS) and sorted(SCHEMAS)"
    )
    assert loaded == []


def test_a_process_loads_only_the_apis_it_uses() -> None:
    loaded = _loaded_apis(
        "from kafkapy.protocol import RequestHeader, decode_request, encode_request, SUPPORTED_VERSIONS\n"
        "from kafkapy.protocol.messages import HeartbeatRequest\n"
        "frame = encode_request(RequestHeader(12, 4, 7, 'c'), HeartbeatRequest(group_id='g'))\n"
        "assert decode_request(frame)[1] == HeartbeatRequest(group_id='g')\n"
        "assert len(SUPPORTED_VERSIONS) > 50"
    )
    # the codec's Produce fast path imports Produce's classes with the codec
    assert loaded == ["heartbeat", "produce"]


def test_an_unsupported_request_is_refused_without_loading_its_api() -> None:
    loaded = _loaded_apis(
        "import struct\n"
        "from kafkapy.protocol import UnsupportedVersionError, decode_request\n"
        "for key, version in ((3, 99), (4, 0), (18, 1000)):\n"
        "    try:\n"
        "        decode_request(struct.pack('>hhi', key, version, 1) + b'\\x00\\x00')\n"
        "    except UnsupportedVersionError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit(f'{key} v{version} accepted')"
    )
    assert loaded == ["produce"]
