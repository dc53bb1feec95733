"""A kafkapy broker whose topic `tiered` has a remote tier, for the real-client tiered-read tests.

Run by `compat_tests/test_tiered_read.py` as a subprocess (so the clients talk to a separate
process, as with `kafkapy serve`): it starts a broker on a free port, writes partition 0 of
`tiered` (an aborted transaction early on, many rolled segments), copies the rolled segments
into the given S3 server with the storage copier, moves the local log start past them (as local
retention would) and gives the broker its remote tier. Then it writes what a read_committed
consumer must see to the JSON file named on the command line, prints `READY`, and serves until
its stdin closes.

Why a script: the leader's remote log manager (which copies segments and replays
`__remote_log_metadata` in a running broker) is not in this build; this sets up the state it
would leave, through the same storage pieces, without any hook in the product.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import trio

from kafkapy.broker.remote_fetch import REMOTE_STORAGE_ENABLE, RemoteTier
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore
from kafkapy.testing.remote_tier import append_sample, copy_rolled_segments
from tests.server.helpers import build_node, create_topic

TOPIC = "tiered"


async def serve(args: argparse.Namespace) -> None:
    server = build_node(Path(args.data_dir), {
        "listeners": "PLAINTEXT://127.0.0.1:0", "log.retention.check.interval.ms": "600000",
        "offsets.topic.num.partitions": "1"})
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        assert await server.wait_ready()
        port = bound[0].port
        await create_topic(port, TOPIC, 1)
        broker = server.broker
        info = broker.topics.get(TOPIC)
        plog = broker.logs.get(TOPIC, 0)
        assert info is not None
        assert plog is not None
        info.configs[REMOTE_STORAGE_ENABLE] = "true"
        committed = append_sample(plog, batches=args.batches, value_bytes=1000, roll_every=20, aborted_at=3)
        store = S3ObjectStore(S3Config(bucket=args.bucket, endpoint_url=args.endpoint, path_style=True,
                                       key_prefix=args.prefix, credentials_file=Path(args.credentials)))
        metadata = RemoteLogMetadataStore()
        copied = copy_rolled_segments(plog, TOPIC, 0, store, metadata)
        local_start = plog.delete_records_before(copied[-1].start_offset)
        broker.remote_tier = RemoteTier(metadata, RemoteLogReader(store))
        await trio.Path(args.out).write_text(json.dumps({
            "port": port, "local_start": local_start, "high_watermark": plog.high_watermark,
            "committed": [[offset, value.hex()] for offset, value in committed]}))
        print("READY", flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)
        server.request_shutdown()
        await server.stopped.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    for name in ("data-dir", "endpoint", "bucket", "prefix", "credentials", "out"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--batches", type=int, default=200)
    trio.run(serve, parser.parse_args())


if __name__ == "__main__":
    main()
