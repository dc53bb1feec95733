"""The log cleaner's segment swap: the one step of a clean that must survive a crash.

A clean writes its output segments as `<base>.log.cleaned`, then commits by writing the
`cleaner.swap` marker (old bases, new bases), then renames and deletes. Opening a log finishes
whatever a crash interrupted: a marker means the swap is redone (it is idempotent), no marker
means the `.cleaned` files are discarded and the old segments stand. This lives apart from the
cleaner so that log recovery can finish a swap without importing the cleaner (which imports the
log).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from kafkapy.storage.checkpoint import fsync_dir
from kafkapy.storage.segment import LogSegment, segment_name
from kafkapy.storage.txn_index import AbortedTxnEntry, TransactionIndex

__all__ = [
    "SWAP_MARKER",
    "complete_swap",
    "crash_point",
    "finish_interrupted_swap",
    "marker_text",
    "parse_marker",
    "rebuild_indexes",
]

log = logging.getLogger(__name__)

SWAP_MARKER = "cleaner.swap"
#: index interval of segments rebuilt after a swap (dense: they are read right away)
RECOVERY_INDEX_INTERVAL = 4096


def crash_point(step: str) -> None:
    """No-op; tests replace it to simulate a crash between the steps of a clean."""


def complete_swap(directory: Path, old_bases: list[int], new_bases: list[int]) -> None:
    """Make the directory hold `new_bases` instead of `old_bases` (idempotent)."""
    # Aborted-transaction entries of the merged segments move to the output segment first
    # (as a set, so a redo after a crash cannot duplicate them).
    bounds = [*new_bases[1:], None]
    for base, bound in zip(new_bases, bounds, strict=True):
        group = [o for o in old_bases if o >= base and (bound is None or o < bound)]
        merged: set[AbortedTxnEntry] = set()
        for old in group:
            merged.update(TransactionIndex(directory / f"{segment_name(old)}.txnindex").entries)
        if merged:
            TransactionIndex(directory / f"{segment_name(base)}.txnindex").rewrite(sorted(merged))
    for base in new_bases:
        stem = segment_name(base)
        cleaned = directory / f"{stem}.log.cleaned"
        if cleaned.exists():
            os.replace(cleaned, directory / f"{stem}.log")
            crash_point("renaming")
    keep = set(new_bases)
    for base in old_bases:
        stem = segment_name(base)
        suffixes = ((".index", ".timeindex") if base in keep
                    else (".log", ".index", ".timeindex", ".txnindex"))
        for suffix in suffixes:
            with contextlib.suppress(FileNotFoundError):
                (directory / f"{stem}{suffix}").unlink()
    fsync_dir(directory)


def rebuild_indexes(directory: Path, bases: list[int]) -> list[LogSegment]:
    segments = []
    for base in bases:
        seg = LogSegment(directory, base, index_interval_bytes=RECOVERY_INDEX_INTERVAL)
        seg.recover(base, 1 << 62)
        seg.seal()
        seg.flush(fsync=True)
        segments.append(seg)
    return segments


def finish_interrupted_swap(directory: Path) -> None:
    """At open: redo a committed swap, or discard an uncommitted clean's `.cleaned` files."""
    marker = directory / SWAP_MARKER
    try:
        text = marker.read_text("ascii")
    except FileNotFoundError:
        text = None
    if text is not None:
        parsed = parse_marker(text)
        if parsed is not None:
            old_bases, new_bases = parsed
            log.warning("%s: completing an interrupted log-cleaner swap", directory.name)
            complete_swap(directory, old_bases, new_bases)
            for seg in rebuild_indexes(directory, new_bases):
                seg.close()
        marker.unlink()
        fsync_dir(directory)
    for path in directory.glob("*.cleaned"):
        path.unlink()


def marker_text(old_bases: list[int], new_bases: list[int]) -> str:
    return (
        "version 0\n"
        f"replace {' '.join(map(str, old_bases))}\n"
        f"with {' '.join(map(str, new_bases))}\n"
    )


def parse_marker(text: str) -> tuple[list[int], list[int]] | None:
    lines = text.splitlines()
    if len(lines) != 3 or lines[0] != "version 0":
        return None
    try:
        old = [int(x) for x in lines[1].removeprefix("replace ").split()]
        new = [int(x) for x in lines[2].removeprefix("with ").split()]
    except ValueError:
        return None
    return old, new
