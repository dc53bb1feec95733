"""Fetch throughput from the remote tier vs the local tier, in one run (KIP-405 read side).

Why: a consumer catching up from offset 0 on a tiered topic reads through the remote tier -
ranged GETs of `chunk` bytes through the reader's bounded cache, on a worker thread - instead
of `sendfile` from local segments. This measures what that costs a consumer end to end.

Setup: one broker in this process, a real S3 server (SeaweedFS, or `--s3 moto`) as a child
process; topic `bench` with two partitions written identically (`--mb` MB each, 1 MB segments).
Partition 0's rolled segments are copied to the store by the storage copier and deleted
locally (`kafkapy.testing.remote_tier`); partition 1 keeps everything on disk. One client then
fetches each partition's copied range from offset 0 (Fetch v12, 1 MB partition max bytes, one
request at a time): partition 0 from the remote tier, partition 1 from disk.

Figures: MB/s and fetches for each tier, the remote/local ratio, and the reader's GETs (offset
indexes and chunks: its cache misses). JSON: perf/results/remote_read_bench.json.

    .venv/bin/python perf/remote_read_bench.py [--mb 32] [--chunk-mb 4] [--s3 seaweedfs|moto]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF.parent))

from kafkapy.broker.remote_fetch import REMOTE_STORAGE_ENABLE, RemoteTier  # noqa: E402
from kafkapy.protocol import ApiKey  # noqa: E402
from kafkapy.protocol.messages import FetchRequest  # noqa: E402
from kafkapy.protocol.records import iter_batches  # noqa: E402
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore  # noqa: E402
from kafkapy.storage.remote.reader import RemoteLogReader  # noqa: E402
from kafkapy.storage.remote.s3 import S3ObjectStore  # noqa: E402
from kafkapy.testing.object_store import S3Server  # noqa: E402
from kafkapy.testing.remote_tier import append_sample, copy_rolled_segments  # noqa: E402
from tests.server.helpers import Client, create_topic, running_broker  # noqa: E402

RESULTS = PERF / "results" / "remote_read_bench.json"
TOPIC = "bench"
VALUE_BYTES = 1000
RECORDS_PER_BATCH = 16
BATCHES_PER_SEGMENT = 64  # about 1 MB segments


async def read_range(client: Client, partition: int, end: int) -> tuple[int, int, float]:
    """Fetch `partition` from offset 0 to `end`: (bytes, fetches, seconds)."""
    offset, size, fetches = 0, 0, 0
    started = time.perf_counter()
    while offset < end:
        req = FetchRequest(max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[FetchRequest.FetchPartition(
                               partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
        part = (await client.request(ApiKey.FETCH, 12, req)).responses[0].partitions[0]
        fetches += 1
        if part.error_code:
            raise RuntimeError(f"partition {partition} at {offset}: error {part.error_code}")
        data = bytes(part.records or b"")
        if data:
            size += len(data)
            offset = max(h.base_offset + h.last_offset_delta for _, h in iter_batches(data)) + 1
    return size, fetches, time.perf_counter() - started


async def run(args: argparse.Namespace, s3: S3Server, data_dir: Path) -> dict[str, Any]:
    async with running_broker(data_dir) as (broker, _, port):
        await create_topic(port, TOPIC, 2)
        info = broker.topics.get(TOPIC)
        assert info is not None
        info.configs[REMOTE_STORAGE_ENABLE] = "true"
        batches = args.mb * (1 << 20) // (VALUE_BYTES * RECORDS_PER_BATCH)
        logs = [broker.logs.get(TOPIC, p) for p in (0, 1)]
        for plog in logs:
            assert plog is not None
            append_sample(plog, batches=batches, records_per_batch=RECORDS_PER_BATCH, value_bytes=VALUE_BYTES,
                          roll_every=BATCHES_PER_SEGMENT)
        store = S3ObjectStore(s3.config(key_prefix=f"bench-{uuid.uuid4().hex[:8]}"))
        metadata = RemoteLogMetadataStore()
        started = time.perf_counter()
        tiered = logs[0]
        assert tiered is not None
        copied = copy_rolled_segments(tiered, TOPIC, 0, store, metadata)
        copy_s = time.perf_counter() - started
        end = copied[-1].end_offset + 1
        tiered.delete_records_before(end)
        reader = RemoteLogReader(store, chunk_bytes=args.chunk_mb << 20, cache_bytes=64 << 20)
        broker.remote_tier = RemoteTier(metadata, reader, fetch_max_wait_ms=30_000)
        client = await Client.connect(port)
        local = await read_range(client, 1, end)
        remote = await read_range(client, 0, end)
        if local[0] != remote[0]:
            raise RuntimeError(f"the tiers returned {remote[0]} and {local[0]} bytes")
        return {
            "mb": args.mb, "chunk_mb": args.chunk_mb, "s3": args.s3, "segments_copied": len(copied),
            "copy_mb_per_s": round(remote[0] / copy_s / 1e6, 1),
            "remote": {"bytes": remote[0], "fetches": remote[1], "seconds": round(remote[2], 3),
                       "mb_per_s": round(remote[0] / remote[2] / 1e6, 1), "gets": reader.cache.misses},
            "local": {"bytes": local[0], "fetches": local[1], "seconds": round(local[2], 3),
                      "mb_per_s": round(local[0] / local[2] / 1e6, 1)},
            "remote_over_local": round(local[2] / remote[2], 3),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32, help="MB written to each partition")
    parser.add_argument("--chunk-mb", type=int, default=4, help="the reader's ranged GET size")
    parser.add_argument("--s3", choices=("seaweedfs", "moto"), default="seaweedfs")
    args = parser.parse_args()
    with S3Server(args.s3) as s3, tempfile.TemporaryDirectory(prefix="remote-read-bench-") as tmp:
        result = trio.run(run, args, s3, Path(tmp))
    r, loc = result["remote"], result["local"]
    print(f"remote tier: {r['mb_per_s']:>7.1f} MB/s  {r['bytes'] / 1e6:.1f} MB in {r['seconds']} s, "
          f"{r['fetches']} fetches, {r['gets']} GETs (indexes, {args.chunk_mb} MB chunks) ({args.s3})")
    print(f"local tier:  {loc['mb_per_s']:>7.1f} MB/s  {loc['bytes'] / 1e6:.1f} MB in {loc['seconds']} s, "
          f"{loc['fetches']} fetches")
    print(f"remote / local throughput: {result['remote_over_local']:.3f}; copy to the store "
          f"{result['copy_mb_per_s']} MB/s ({result['segments_copied']} segments)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"JSON: {RESULTS}")


if __name__ == "__main__":
    main()
