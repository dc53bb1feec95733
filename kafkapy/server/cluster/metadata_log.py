"""The Raft log of the metadata quorum on disk: a `RaftLog` over the `__cluster_metadata-0`
`PartitionLog`, plus the persisted quorum state (`quorum-state`) beside it.

Why a PartitionLog: the metadata log is a Kafka partition like any other - record batches
whose partition leader epoch is the Raft epoch, one record per entry (value = the entry's
bytes) - so it gets crash recovery, the leader-epoch cache (which answers
`end_offset_for_epoch`) and the on-disk format for free, and tools reading Kafka logs read it.

Why it is shared with the `LogManager`: the manager opens every partition directory at start,
this one included; two `PartitionLog`s over one directory would each keep their own idea of the
log end. So this module takes the manager's instance (docs/cluster.md); the broker's topic-log
reconciliation leaves it alone. Retention is off: only snapshots move the log start.

Snapshots (KIP-630) live beside the segments as `<end offset>-<epoch>.checkpoint` (Kafka's
names: 20 and 10 digits), written atomically with fsync. Adopting one moves the log start to its
end offset (`delete_records_before`: whole segments below it go) - or, when the log does not
hold the snapshot's last entry, restarts the log empty there (`truncate_fully`). `open` adopts the
newest snapshot again by the same rule, so a crash between writing a snapshot and moving the
log start changes nothing. The two newest snapshot files are kept (a fetcher part-way through
the older one can finish it); older ones are deleted.

`quorum-state` is JSON written atomically (temp file, fsync, rename, fsync of the directory)
before the driver sends anything that depends on it - a vote is only granted once it is durable.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.raft import Entry, QuorumState, SnapshotId
from kafkapy.raft.wire import (
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    entries_from_batches,
    entries_to_batches,
)
from kafkapy.storage import LogConfig, PartitionLog
from kafkapy.storage.checkpoint import write_atomic

if TYPE_CHECKING:
    from kafkapy.storage import LogManager

__all__ = [
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "QUORUM_STATE_FILE",
    "MetadataLog",
    "entries_from_batches",
    "entries_to_batches",
    "read_quorum_state",
    "snapshot_file_name",
    "write_quorum_state",
]

log = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
_READ_BYTES = 1024 * 1024
_NO_RETENTION = {"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_SNAPSHOTS_KEPT = 2


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    """Kafka's snapshot file name: `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint`."""
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}.checkpoint"



def read_quorum_state(directory: Path) -> QuorumState:
    """The persisted quorum state, or epoch 0 with no vote and no leader when there is none."""
    path = directory / QUORUM_STATE_FILE
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return QuorumState(0)
    except (OSError, ValueError) as exc:
        # the file is replaced atomically, so a bad one was not written by us: refuse to guess
        raise RuntimeError(f"unreadable {path}: {exc}") from exc
    voted = int(raw.get("votedId", -1))
    leader = int(raw.get("leaderId", -1))
    return QuorumState(
        int(raw["leaderEpoch"]), voted if voted >= 0 else None, leader if leader >= 0 else None
    )


def write_quorum_state(directory: Path, state: QuorumState) -> None:
    """Persist `state` durably (fsync of the file and of the directory) before it is used."""
    data = {
        "leaderEpoch": state.epoch,
        "votedId": -1 if state.voted_for is None else state.voted_for,
        "leaderId": -1 if state.leader_id is None else state.leader_id,
        "data_version": 0,
    }
    write_atomic(directory / QUORUM_STATE_FILE, json.dumps(data).encode(), fsync=True)


class MetadataLog:
    """`RaftLog` over a `PartitionLog` (see the module doc). Not thread-safe: the driver calls
    it from the trio thread, except `flush()`, which it runs in a worker thread while nothing
    else touches the log."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self._snapshot: SnapshotId | None = None
        snapshots = self.snapshot_ids()
        if snapshots:
            self.adopt_snapshot(snapshots[-1])

    @classmethod
    def open(cls, logs: LogManager) -> MetadataLog:
        """The manager's `__cluster_metadata-0` log (created when absent), retention off."""
        config = LogConfig.from_topic_configs(_NO_RETENTION, logs.default_config)
        plog = logs.get(METADATA_TOPIC, METADATA_PARTITION)
        if plog is None:
            plog = logs.get_or_create(METADATA_TOPIC, METADATA_PARTITION, config, METADATA_TOPIC_ID)
        else:
            plog.set_config(config, logs.default_config)
        return cls(plog)

    @property
    def directory(self) -> Path:
        return self.plog.directory

    def start_offset(self) -> int:
        return self.plog.log_start_offset

    def end_offset(self) -> int:
        return self.plog.log_end_offset

    def last_epoch(self) -> int:
        end = self.plog.log_end_offset
        return (self.epoch_at(end - 1) or 0) if end > 0 else 0

    def epoch_at(self, offset: int) -> int | None:
        start = self.plog.log_start_offset
        if self._snapshot is not None and offset == start - 1 == self._snapshot.end_offset - 1:
            return self._snapshot.epoch
        if not start <= offset < self.plog.log_end_offset:
            return None
        entries = self.plog.leader_epochs.entries
        starts = [start for _, start in entries]
        i = bisect.bisect_right(starts, offset)
        return entries[i - 1][0] if i > 0 else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        entries = self.plog.leader_epochs.entries
        end = self.plog.log_end_offset
        i = bisect.bisect_right([e for e, _ in entries], epoch)
        next_start = entries[i][1] if i < len(entries) else end
        if i == 0:
            if self._snapshot is not None and self._snapshot.epoch <= epoch:
                return (self._snapshot.epoch, next_start)
            return (0, next_start if entries else end)
        return (entries[i - 1][0], next_start)

    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        if entries[0].offset != self.plog.log_end_offset:
            raise ValueError(
                f"append at {entries[0].offset}, log end is {self.plog.log_end_offset}"
            )
        self.plog.append_as_follower(entries_to_batches(entries))
        self.plog.high_watermark = self.plog.log_end_offset  # retention is off; keeps reads simple

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        out: list[Entry] = []
        end = self.plog.log_end_offset
        while offset < end and len(out) < max_entries:
            data = self.plog.read_bytes(offset, _READ_BYTES)
            got = entries_from_batches(data, first_offset=offset)
            if not got:
                break
            out += got[: max_entries - len(out)]
            offset = got[-1].offset + 1
        return out

    def truncate_to(self, offset: int) -> None:
        """Drop entries at or above `offset`. The PartitionLog drops a straddling batch whole,
        so the entries of that batch below `offset` are written back."""
        end = self.plog.log_end_offset
        if offset >= end:
            return
        if offset < self.plog.log_start_offset:
            raise ValueError(f"truncation to {offset}, below the log start")
        keep: list[Entry] = []
        if offset > self.plog.log_start_offset:
            batch = entries_from_batches(self.plog.read_bytes(offset - 1, _READ_BYTES))
            keep = [e for e in batch if e.offset < offset]
        self.plog.truncate_to(offset)
        keep = [e for e in keep if e.offset >= self.plog.log_end_offset]
        if keep:
            self.append(keep)
        log.info("metadata log truncated to %d (was %d)", self.plog.log_end_offset, end)

    def flush(self) -> None:
        self.plog.flush()

    # ------------------------------------------------------------------ snapshots

    def snapshot_ids(self) -> list[SnapshotId]:
        """The snapshots on disk, oldest first."""
        out = []
        for name in os.listdir(self.plog.directory):
            m = _SNAPSHOT_NAME.match(name)
            if m:
                out.append(SnapshotId(int(m.group(1)), int(m.group(2))))
        return sorted(out)

    def snapshot_path(self, snapshot_id: SnapshotId) -> Path:
        return self.plog.directory / snapshot_file_name(snapshot_id)

    def latest_snapshot(self) -> SnapshotId | None:
        return self._snapshot

    def read_snapshot(
        self, snapshot_id: SnapshotId, position: int, max_bytes: int
    ) -> tuple[bytes, int] | None:
        try:
            with open(self.snapshot_path(snapshot_id), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if not 0 <= position <= size:
                    return None
                f.seek(position)
                return f.read(min(max(1, max_bytes), size - position)), size
        except FileNotFoundError:
            return None

    def store_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Write the snapshot file durably (temp file, fsync, rename, fsync of the directory);
        safe to call from a worker thread - it touches no log state."""
        write_atomic(self.snapshot_path(snapshot_id), data, fsync=True)

    def adopt_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Start the log at the snapshot's end (the module doc's rule); drop old snapshots."""
        if not self.snapshot_path(snapshot_id).exists():
            raise ValueError(f"snapshot {snapshot_id} was never stored")
        if self._snapshot is not None and snapshot_id <= self._snapshot:
            return
        end = snapshot_id.end_offset
        plog = self.plog
        start = plog.log_start_offset
        self._snapshot = None  # epoch_at below must see the log itself
        keep = end == start or (
            end <= plog.log_end_offset and self.epoch_at(end - 1) == snapshot_id.epoch
        )
        if keep:
            plog.high_watermark = plog.log_end_offset
            plog.delete_records_before(end)
        else:
            plog.truncate_fully(end)
        self._snapshot = snapshot_id
        for old in self.snapshot_ids()[:-_SNAPSHOTS_KEPT]:
            with contextlib.suppress(FileNotFoundError):
                self.snapshot_path(old).unlink()
        log.info(
            "metadata log starts at snapshot %s (log end %d)", snapshot_id, plog.log_end_offset
        )
