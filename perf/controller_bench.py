"""What the controller's decisions and the metadata replay cost (pure, no sockets).

Usage:
    perf/controller_bench.py [--brokers N] [--topics N] [--partitions N] [--runs N]
                             [--cluster-topics N] [--json out.json]

Phases (each timed with perf_counter, median over runs):
- create: a QuorumController with N registered, unfenced brokers creates T topics of P
  partitions (RF 3) one CreateTopics each: topics/s and records/s (the controller's side of a
  CreateTopics; the commit through Raft is not included).
- encode / decode: every record of the run through the metadata record codec (records/s).
- replay: a fresh MetadataImage applies them all (records/s) - what every node does at start-up
  and what a broker pays per committed batch.
- fence: one broker's session expires; the controller moves its leaderships (partitions/s).
- cluster (with --cluster-topics N > 0): three in-process nodes on 127.0.0.1; N CreateTopics
  (1 partition, RF 3) one after another through a broker that is not the controller: latency
  p50/p99 from request to answer (the answer waits for the commit and the local image), then
  the time from stopping the active controller until another node is active.

Why these: a restarted node replays the whole metadata log, and the controller runs on the
Raft leader's trio thread, so both must stay far below the request timeouts at the partition
counts kafkapy targets (tens of thousands).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkapy.controller.controller import ControllerConfig, NewTopic, QuorumController
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.records import Endpoint, MetadataRecord, decode_record, encode_record


def one_run(brokers: int, topics: int, partitions: int) -> dict[str, float]:
    ctl = QuorumController(
        ControllerConfig(cluster_id="bench", session_timeout_ms=1000), MetadataImage(),
        rng=random.Random(1),
    )
    records: list[MetadataRecord] = []
    for b in range(brokers):
        r = ctl.register_broker(
            b, cluster_id="bench", incarnation_id=uuid.uuid4(),
            endpoints=[Endpoint("PLAINTEXT", "127.0.0.1", 9092 + b)], now_ms=0,
        )
        records += r.records
    for b in range(brokers):
        records += ctl.broker_heartbeat(b, ctl.image.brokers[b].epoch,
                                        current_metadata_offset=ctl.next_offset, now_ms=0).records
    start = time.perf_counter()
    created = 0
    for t in range(topics):
        r = ctl.create_topics([NewTopic(f"topic-{t}", partitions, 3)])
        created += len(r.records)
        records += r.records
    create_s = time.perf_counter() - start

    start = time.perf_counter()
    blobs = [encode_record(r) for r in records]
    encode_s = time.perf_counter() - start
    start = time.perf_counter()
    decoded = [decode_record(b) for b in blobs]
    decode_s = time.perf_counter() - start
    start = time.perf_counter()
    image = MetadataImage()
    for offset, rec in enumerate(decoded):
        image.apply(rec, offset)
    replay_s = time.perf_counter() - start
    assert image == ctl.image

    for b in range(1, brokers):
        ctl.broker_heartbeat(b, ctl.image.brokers[b].epoch, current_metadata_offset=ctl.next_offset,
                             now_ms=900)
    start = time.perf_counter()
    fenced = ctl.tick(1500)
    fence_s = time.perf_counter() - start
    assert fenced.response == [0]
    moved = len(fenced.records) - 1
    return {
        "create_topics_per_s": topics / create_s,
        "create_records_per_s": created / create_s,
        "encode_records_per_s": len(records) / encode_s,
        "decode_records_per_s": len(records) / decode_s,
        "replay_records_per_s": len(records) / replay_s,
        "fence_partitions_changed": moved,
        "fence_ms": fence_s * 1000,
        "records": len(records),
    }


async def cluster_phase(topics: int) -> dict[str, float]:
    import tempfile

    import trio

    from kafkapy.protocol import ApiKey
    from kafkapy.protocol.messages import CreateTopicsRequest
    from kafkapy.server.cluster.peer import PeerClient
    from kafkapy.testing.local import open_cluster

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as base:
        async with open_cluster(Path(base), 3) as nodes:
            active = [n for n in nodes if n.broker.cluster and n.broker.cluster.controller.active()]
            other = next(n for n in nodes if n not in active)
            client = PeerClient("127.0.0.1", other.broker_port, client_id="controller-bench")
            latencies = []
            for t in range(topics):
                request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                    name=f"bench-{t}", num_partitions=1, replication_factor=3)], timeout_ms=30_000)
                start = time.perf_counter()
                response = await client.request(ApiKey.CREATE_TOPICS, 7, request, timeout_s=30)
                latencies.append(time.perf_counter() - start)
                assert response.topics[0].error_code == 0, response.topics[0]
            await client.aclose()
            latencies.sort()
            out["cluster_create_p50_ms"] = latencies[len(latencies) // 2] * 1000
            out["cluster_create_p99_ms"] = latencies[int(len(latencies) * 0.99)] * 1000
            out["cluster_creates_per_s"] = topics / sum(latencies)
            if active:
                start = time.perf_counter()
                active[0].server.request_shutdown()
                survivors = [n for n in nodes if n is not active[0]]
                with trio.fail_after(60):
                    while not any(n.broker.cluster.controller.active() for n in survivors):  # type: ignore[union-attr]  # noqa: ASYNC110
                        await trio.sleep(0.005)
                out["controller_failover_ms"] = (time.perf_counter() - start) * 1000
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cluster-topics", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    runs = [one_run(args.brokers, args.topics, args.partitions) for _ in range(args.runs)]
    summary: dict[str, Any] = {
        "brokers": args.brokers, "topics": args.topics, "partitions": args.partitions,
        "runs": args.runs,
    }
    for key in runs[0]:
        summary[key] = statistics.median(r[key] for r in runs)
    if args.cluster_topics > 0:
        import trio

        summary.update(trio.run(cluster_phase, args.cluster_topics))
    for key, value in summary.items():
        print(f"{key:28s} {value:,.1f}" if isinstance(value, float) else f"{key:28s} {value}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
