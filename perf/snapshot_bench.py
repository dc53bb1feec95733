"""Metadata snapshot benchmark: what a node does at start-up to rebuild its metadata image, with
and without a snapshot (KIP-630), over the real on-disk metadata log (`MetadataLog` on a
`PartitionLog`).

The log: `--topics` topics of `--partitions` partitions (TopicRecord + PartitionRecords), then
`--changes` PartitionChangeRecords (ISR / leader churn: what makes a real metadata log long).
Two start-ups are timed, each `--runs` times, median reported (CPU seconds of this process, which
does nothing else, and wall seconds):

- `replay_*`: open the log, read every entry, decode and apply it to an empty image - what a
  node did before snapshots (and still does for the tail).
- `snapshot_*`: the same log after a snapshot at its end plus `--tail` more change records:
  open the log (whole segments below the snapshot are gone), decode the snapshot, replay the
  tail.

Also printed: `log_bytes` (segments on disk before / after the snapshot), `snapshot_bytes`,
`encode_cpu_s` (encoding the image; the driver does it in a worker thread) and
`images_equal` (the two start-ups must build the same image).

Run: .venv/bin/python perf/snapshot_bench.py [--topics N] [--changes N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kafkapy.controller.image import MetadataImage  # noqa: E402
from kafkapy.controller.records import (  # noqa: E402
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot  # noqa: E402
from kafkapy.raft import Entry, SnapshotId  # noqa: E402
from kafkapy.server.cluster.metadata_log import MetadataLog  # noqa: E402
from kafkapy.storage import LogConfig, LogManager  # noqa: E402

RESULTS = ROOT / "perf" / "results" / "snapshot_bench.json"
SEGMENT_BYTES = 1 << 20
APPEND_BATCH = 500


def records(topics: int, partitions: int, changes: int, rng: random.Random) -> list[MetadataRecord]:
    out: list[MetadataRecord] = []
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(topics)]
    for i, tid in enumerate(ids):
        out.append(TopicRecord(f"topic-{i}", tid))
        out += [PartitionRecord(p, tid, (1, 2, 3), (1, 2, 3), 1) for p in range(partitions)]
    for _ in range(changes):
        isr = tuple(sorted(rng.sample((1, 2, 3), rng.randint(1, 3))))
        out.append(PartitionChangeRecord(rng.randrange(partitions), rng.choice(ids), isr, isr[0]))
    return out


def write_log(directory: Path, recs: list[MetadataRecord]) -> None:
    logs = LogManager([directory], LogConfig(segment_bytes=SEGMENT_BYTES))
    mlog = MetadataLog.open(logs)
    start = mlog.end_offset()
    raw = [encode_record(r) for r in recs]
    for i in range(0, len(raw), APPEND_BATCH):
        mlog.append([Entry(start + i + j, 1, d) for j, d in enumerate(raw[i : i + APPEND_BATCH])])
    mlog.flush()
    logs.close()


def replay(image: MetadataImage, entries: list[Entry]) -> None:
    for e in entries:
        image.apply(decode_record(e.data), e.offset)


def start_up(directory: Path) -> MetadataImage:
    """What a node does: open the log, load the newest snapshot, replay the rest."""
    logs = LogManager([directory], LogConfig(segment_bytes=SEGMENT_BYTES))
    try:
        mlog = MetadataLog.open(logs)
        snapshot = mlog.latest_snapshot()
        image = MetadataImage()
        if snapshot is not None:
            got = mlog.read_snapshot(snapshot, 0, 1 << 31)
            assert got is not None
            _, image = decode_snapshot(got[0])
        offset = mlog.start_offset()
        while offset < mlog.end_offset():
            entries = mlog.read(offset, 5000)
            replay(image, entries)
            offset = entries[-1].offset + 1
        return image
    finally:
        logs.close()


def log_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*.log"))


def timed(fn: Callable[[], MetadataImage], runs: int) -> tuple[float, float, MetadataImage]:
    cpu, wall = [], []
    image = MetadataImage()
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        image = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall), image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--tail", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    rng = random.Random(42)
    recs = records(args.topics, args.partitions, args.changes, rng)
    ids = [r.topic_id for r in recs if isinstance(r, TopicRecord)]
    tail: list[MetadataRecord] = [
        PartitionChangeRecord(rng.randrange(args.partitions), rng.choice(ids), (1, 2), 1)
        for _ in range(args.tail)
    ]
    with tempfile.TemporaryDirectory(prefix="snapshot_bench") as tmp:
        a, b = Path(tmp) / "replay", Path(tmp) / "snapshot"
        write_log(a, recs + tail)
        # the snapshot node: same log up to the snapshot point, then the tail
        write_log(b, recs)
        image = start_up(b)
        logs = LogManager([b], LogConfig(segment_bytes=SEGMENT_BYTES))
        mlog = MetadataLog.open(logs)
        end = mlog.end_offset()
        c0 = time.process_time()
        data = encode_snapshot(image, end_offset=end, epoch=1, timestamp_ms=0)
        encode_cpu = time.process_time() - c0
        before = log_bytes(b)
        sid = SnapshotId(end, 1)
        mlog.store_snapshot(sid, data)
        mlog.adopt_snapshot(sid)
        raw = [encode_record(r) for r in tail]
        mlog.append([Entry(end + j, 1, d) for j, d in enumerate(raw)])
        mlog.flush()
        logs.close()
        after = log_bytes(b)
        replay_cpu, replay_wall, img_a = timed(lambda: start_up(a), args.runs)
        snap_cpu, snap_wall, img_b = timed(lambda: start_up(b), args.runs)
    img_b.offset = img_a.offset  # the snapshot's image ends where its log does
    figures = {
        "records": len(recs) + len(tail),
        "replay_cpu_s": round(replay_cpu, 3),
        "replay_wall_s": round(replay_wall, 3),
        "snapshot_cpu_s": round(snap_cpu, 3),
        "snapshot_wall_s": round(snap_wall, 3),
        "speedup_cpu": round(replay_cpu / snap_cpu, 1) if snap_cpu else None,
        "log_bytes_before": before,
        "log_bytes_after": after,
        "snapshot_bytes": len(data),
        "encode_cpu_s": round(encode_cpu, 3),
        "images_equal": img_a == img_b,
        "args": vars(args) | {"json": str(args.json)},
    }
    for k, v in figures.items():
        print(f"{k}: {v}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
