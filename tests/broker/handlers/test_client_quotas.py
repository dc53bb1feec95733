"""DescribeClientQuotas / AlterClientQuotas over the wire on a node: Kafka's answers, the
image-backed describe, validate_only, and quotas kept across a restart (metadata log)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from tests.server.helpers import Client, running_broker

pytestmark = pytest.mark.timeout(120)
Entry = AlterClientQuotasRequest.EntryData
Entity = AlterClientQuotasRequest.EntityData
Op = AlterClientQuotasRequest.OpData
Component = DescribeClientQuotasRequest.ComponentData


def entry(pairs: list[tuple[str, str | None]], *ops: tuple[str, float | None]) -> Entry:
    return Entry(
        entity=[Entity(entity_type=t, entity_name=n) for t, n in pairs],
        ops=[Op(key=k, value=v or 0.0, remove=v is None) for k, v in ops],
    )


async def alter(c: Client, *entries: Entry, version: int = 1, validate_only: bool = False) -> list[tuple[int, str | None]]:
    resp = await c.request(ApiKey.ALTER_CLIENT_QUOTAS, version, AlterClientQuotasRequest(entries=list(entries), validate_only=validate_only))
    assert len(resp.entries) == len(entries)
    for got, sent in zip(resp.entries, entries, strict=True):
        assert {(e.entity_type, e.entity_name) for e in got.entity} == {(e.entity_type, e.entity_name) for e in sent.entity}
    return [(int(e.error_code), e.error_message) for e in resp.entries]


async def describe(c: Client, *components: tuple[str, int, str | None], strict: bool = False, version: int = 1) -> tuple[int, dict[frozenset[tuple[str, str | None]], dict[str, float]]]:
    resp = await c.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, DescribeClientQuotasRequest(
        components=[Component(entity_type=t, match_type=m, match=n) for t, m, n in components], strict=strict))
    found = {
        frozenset((e.entity_type, e.entity_name) for e in item.entity): {v.key: v.value for v in item.values}
        for item in resp.entries or []
    }
    return int(resp.error_code), found


async def test_alter_then_describe_then_restart(tmp_path: Path) -> None:
    alice_app = frozenset({("user", "alice"), ("client-id", "app")})
    async with running_broker(tmp_path) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(60):
            assert await alter(
                c,
                entry([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", 102400.0)),
                entry([("client-id", None)], ("consumer_byte_rate", 2048.0), ("request_percentage", 25.5)),
                version=0,
            ) == [(0, None), (0, None)]
            # answered after this node's image has it: describe sees it at once
            code, found = await describe(c)
            assert code == ErrorCode.NONE
            assert found == {
                alice_app: {"producer_byte_rate": 102400.0},
                frozenset({("client-id", None)}): {"consumer_byte_rate": 2048.0, "request_percentage": 25.5},
            }
            assert (await describe(c, ("client-id", 1, None), strict=True, version=0))[1] == {
                frozenset({("client-id", None)}): {"consumer_byte_rate": 2048.0, "request_percentage": 25.5}
            }
            assert (await describe(c, ("user", 0, "alice"), strict=True))[1] == {}
            # validate_only: checked, not stored
            assert await alter(c, entry([("user", "bob")], ("producer_byte_rate", 5.0)), validate_only=True) == [(0, None)]
            assert frozenset({("user", "bob")}) not in (await describe(c))[1]
            await c.aclose()
    async with running_broker(tmp_path) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(60):
            code, found = await describe(c, ("user", 2, None))
            assert (code, found) == (ErrorCode.NONE, {alice_app: {"producer_byte_rate": 102400.0}})
            assert await alter(c, entry([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", None))) == [(0, None)]
            assert (await describe(c, ("user", 2, None)))[1] == {}
            await c.aclose()


async def test_bad_requests_get_kafkas_codes() -> None:
    async with running_broker(None) as (_, _, port):
        c = await Client.connect(port)
        with trio.fail_after(60):
            answers = await alter(
                c,
                entry([("user", "a")], ("no_such_quota", 1.0)),
                entry([("user", "b")], ("producer_byte_rate", -100.0)),
                entry([("client-id", "")], ("producer_byte_rate", 100.0)),
                entry([("ip", None)], ("connection_creation_rate", 10.0)),
                entry([("client-id", "ok")], ("controller_mutation_rate", 1.5)),
            )
            assert [code for code, _ in answers] == [ErrorCode.INVALID_REQUEST] * 4 + [ErrorCode.NONE]
            assert "Invalid configuration key no_such_quota" in (answers[0][1] or "")
            assert "greater than 0" in (answers[1][1] or "")
            assert (await describe(c, ("user", 2, None)))[1] == {}
            assert (await describe(c, ("group", 2, None)))[0] == ErrorCode.UNSUPPORTED_VERSION
            assert (await describe(c, ("user", 0, None)))[0] == ErrorCode.INVALID_REQUEST
            await c.aclose()
