"""`kafkapy serve --memory` in a fresh process: what it has loaded by its ready line, and that
the pieces it leaves for later load when a request needs them.

Why: issue 26 wants start-to-ready short, so the active controller's topic/config/SCRAM/quota
decisions, the replica fetcher's Fetch machinery and the remote tier's read side load on first
use. A user relies on the broker answering ApiVersions, Metadata (creating a topic), Produce
and Fetch right after the ready line, whatever is loaded by then.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkapy.protocol.records import iter_batches
from tests.cli.conftest import communicate
from tests.server.helpers import Client, batch

READY = re.compile(r"kafkapy ready: listening on 127\.0\.0\.1:(\d+)")

#: `kafkapy serve` that prints `sys.modules` (one JSON line) when it prints its ready line
SERVE_REPORTING_MODULES = (
    "import json, sys\n"
    "import kafkapy.cli.main as cli\n"
    "ready_line = cli._ready_line\n"
    "def report(*args):\n"
    "    print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)\n"
    "    return ready_line(*args)\n"
    "cli._ready_line = report\n"
    "sys.exit(cli.main(sys.argv[1:]))\n"
)

#: what a single node does not need before its first request (each loads on first use)
LOADED_ON_FIRST_USE = {
    "kafkapy.controller.topics",
    "kafkapy.controller.configs",
    "kafkapy.controller.scram",
    "kafkapy.controller.quotas",
    "kafkapy.protocol.fetch_response",
    "kafkapy.replication.follower_session",
    "kafkapy.broker.remote_fetch",
    "kafkapy.storage.remote.metadata",
    "kafkapy.protocol.messages.alter_partition",
    "kafkapy.protocol.messages.create_topics",
    "kafkapy.protocol.messages.write_txn_markers",
    "kafkapy.protocol.messages.sasl_handshake",
    "cramjam",
    "lz4",
    "zstandard",
}


async def _produce_and_fetch(port: int, topic: str) -> None:
    client = await Client.connect(port)
    try:
        versions = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="test", client_software_version="1"))
        assert versions.error_code == ErrorCode.NONE
        assert {k.api_key for k in versions.api_keys} >= {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA}
        with trio.fail_after(30):
            while True:  # auto-creation: the controller's topic decisions load here
                md = await client.request(ApiKey.METADATA, 12, MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)]))
                if md.topics[0].error_code == ErrorCode.NONE and md.topics[0].partitions:
                    break
                await trio.sleep(0.1)
        produced = await client.request(ApiKey.PRODUCE, 9, ProduceRequest(
            acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch(b"a", b"b"))])]))
        answer = produced.responses[0].partition_responses[0]
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 0)
        fetched = await client.request(ApiKey.FETCH, 11, FetchRequest(
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
        part = fetched.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (ErrorCode.NONE, 2)
        assert [header.records_count for _, header in iter_batches(bytes(part.records))] == [2]
    finally:
        await client.aclose()


@pytest.mark.timeout(120)
def test_serve_memory_is_ready_without_the_later_pieces_and_serves_produce_and_fetch() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_REPORTING_MODULES, "serve", "--memory",
         "--listeners", "PLAINTEXT://127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stderr is not None
        loaded: set[str] = set()
        for line in proc.stderr:
            if line.startswith("MODULES "):
                loaded = set(json.loads(line.removeprefix("MODULES ")))
            m = READY.search(line)
            if m:
                port = int(m.group(1))
                break
        else:
            raise AssertionError("no readiness line")
        assert "kafkapy.controller.controller" in loaded  # a single node is its own controller
        assert not loaded & LOADED_ON_FIRST_USE, sorted(loaded & LOADED_ON_FIRST_USE)
        trio.run(_produce_and_fetch, port, "first-use")
        proc.terminate()
        _, rest = communicate(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, rest
