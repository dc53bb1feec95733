"""Audit: no handler sends an error code to a request version older than the code.

Kafka's message definitions note, per response, the version from which a code may appear
("Version 2 adds the support for new error code PRODUCER_FENCED", "- STALE_MEMBER_EPOCH
(version 9+)"). Every such note must be covered for every API kafkapy serves: the served
versions start at or above it, the code is downgraded by `protocol.error_versions` (checked
through the connection on the wire), kafkapy never sends the code at all, or - listed here
with the reason - the code can only arise from request fields that older versions lack.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import trio

from kafkapy.broker.handlers import load_handlers
from kafkapy.broker.handlers.registry import CONTROLLER_REGISTRY, REGISTRY
from kafkapy.broker.handlers.shared.mutation_quota import STRICT_FROM
from kafkapy.protocol import ApiKey
from kafkapy.protocol.error_versions import ERRORS_SINCE
from kafkapy.protocol.errors import ErrorCode as E
from tests.broker.test_transactions import TXN_SETTINGS, Txn
from tests.protocol.specs import reference_dir

from .helpers import Client, create_topic, running_broker

ROOT = Path(__file__).resolve().parents[2]

#: (api, code) -> why older versions cannot receive it from kafkapy
ONLY_FROM_FIELDS: dict[tuple[ApiKey, E], str] = {
    (ApiKey.OFFSET_COMMIT, E.ILLEGAL_GENERATION): "v0 carries no generation: kafkapy, like Kafka's "
    "classic coordinator, judges it as generation -1 (the note lists the code from v1 for that reason)",
    (ApiKey.OFFSET_COMMIT, E.UNKNOWN_MEMBER_ID): "as ILLEGAL_GENERATION: v0 has no member id field",
    (ApiKey.OFFSET_COMMIT, E.GROUP_ID_NOT_FOUND): "offsets.py never answers a commit with it",
    (ApiKey.OFFSET_COMMIT, E.FENCED_MEMBER_EPOCH): "only ConsumerGroupHeartbeat fences a member epoch",
    (ApiKey.OFFSET_FETCH, E.UNSTABLE_OFFSET_COMMIT): "answered only with require_stable (v7+)",
    (ApiKey.OFFSET_FETCH, E.UNKNOWN_MEMBER_ID): "member id / epoch fields exist from v9 only",
    (ApiKey.OFFSET_FETCH, E.STALE_MEMBER_EPOCH): "member id / epoch fields exist from v9 only",
    (ApiKey.DELETE_TOPICS, E.UNKNOWN_TOPIC_ID): "topic ids exist in the request from v6 only",
    (ApiKey.DELETE_TOPICS, E.UNSUPPORTED_VERSION): "topic ids exist in the request from v6 only",
    (ApiKey.DESCRIBE_CLUSTER, E.UNSUPPORTED_ENDPOINT_TYPE): "endpoint_type exists from v1 only",
    (ApiKey.DESCRIBE_CLUSTER, E.MISMATCHED_ENDPOINT_TYPE): "endpoint_type exists from v1 only",
}


def _notes() -> list[tuple[ApiKey, E, int]]:
    """(api, code, first version) from the comments of Kafka's response definitions."""
    names = {c.name for c in E} - {"NONE"}
    out: set[tuple[ApiKey, E, int]] = set()
    for path in sorted(reference_dir().glob("*Response.json")):
        text = path.read_text()
        key = int(json.loads("\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")))["apiKey"])
        if key not in ApiKey._value2member_map_:
            continue  # an API the codec does not even speak
        api = ApiKey(key)
        paragraphs, current = [], []
        for line in text.splitlines():
            m = re.match(r"\s*//\s?(.*)", line)
            if m and m.group(1).strip():
                current.append(m.group(1).strip())
            elif current:
                paragraphs.append(" ".join(current))
                current = []
        for para in paragraphs:
            for code in set(re.findall(r"\b[A-Z][A-Z_]{3,}\b", para)) & names:
                m = re.search(code + r" \(version (\d+)\+\)", para) or re.search(r"[Vv]ersion (\d+)", para)
                if m and int(m.group(1)) > 0:
                    out.add((api, E[code], int(m.group(1))))
    return sorted(out)


def _sent_anywhere(code: E) -> bool:
    return any(f"ErrorCode.{code.name}" in p.read_text() for p in (ROOT / "kafkapy").rglob("*.py")
               if p.name != "errors.py")


def test_no_code_reaches_a_version_older_than_the_code() -> None:
    load_handlers()
    notes = _notes()
    assert len(notes) > 20, "the notes parser found too little; the format changed?"
    uncovered = []
    for api, code, since in notes:
        served = [r[api].min_version for r in (REGISTRY, CONTROLLER_REGISTRY) if api in r]
        if not served or min(served) >= since:
            continue
        table = ERRORS_SINCE.get(api, {}).get(code)
        if table is not None:
            assert table[0] == since, f"{api.name} {code.name}: table says v{table[0]}, Kafka v{since}"
            continue
        if not _sent_anywhere(code) or (api, code) in ONLY_FROM_FIELDS:
            continue
        if code is E.THROTTLING_QUOTA_EXCEEDED and api in STRICT_FROM:
            # older versions are throttled, never refused (KIP-599): the strict versions must
            # be exactly those Kafka's note gives the code to
            assert STRICT_FROM[api] == since, f"{api.name}: strict from v{STRICT_FROM[api]}, Kafka v{since}"
            continue
        uncovered.append(f"{api.name} v{min(served)}..{since - 1} may get {code.name}")
    assert uncovered == []


async def test_add_partitions_v0_fenced_producer_gets_invalid_producer_epoch(tmp_path: Path) -> None:
    """On the wire: a zombie's AddPartitionsToTxn v0 is answered INVALID_PRODUCER_EPOCH (47);
    PRODUCER_FENCED (90) exists only from v2 (KIP-588), v3 still gets it."""
    from kafkapy.protocol.messages import AddPartitionsToTxnRequest

    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "z", 1)
            c = await Client.connect(port)
            old = Txn(c, "tx-z")
            assert await old.init() == E.NONE
            assert await Txn(c, "tx-z").init() == E.NONE  # a new incarnation fences `old`
            codes = {}
            for version in (0, 1, 2, 3):
                r = await c.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id="tx-z", v3_and_below_producer_id=old.pid,
                    v3_and_below_producer_epoch=old.epoch,
                    v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                        name="z", partitions=[0])]))
                codes[version] = r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            end = await old.end(True, version=1)
            await c.aclose()
    assert codes == {0: E.INVALID_PRODUCER_EPOCH, 1: E.INVALID_PRODUCER_EPOCH,
                     2: E.PRODUCER_FENCED, 3: E.PRODUCER_FENCED}
    assert end.error_code == E.INVALID_PRODUCER_EPOCH
