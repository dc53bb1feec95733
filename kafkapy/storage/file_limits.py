"""The process's open-files limit, raised to what the system allows before the logs open.

Why: each partition replica holds a few descriptors (its active segment's log, index and time
index, more while segments roll), so 10,000 replicas on a node need tens of thousands, while
the default soft `ulimit -n` is often 1,024. Kafka's documentation asks operators to raise it;
kafkapy raises the soft limit to the hard limit itself at start (an unprivileged process may)
and logs the result, so the limit a node runs with is in its log and a node with many
partitions does not fail at the first roll past the default.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OpenFilesLimit", "raise_open_files_limit"]

log = logging.getLogger(__name__)

#: the kernel's ceiling for a descriptor number, when the hard limit says "unlimited"
_NR_OPEN = Path("/proc/sys/fs/nr_open")
_FALLBACK_CEILING = 1 << 20


@dataclass(frozen=True, slots=True)
class OpenFilesLimit:
    before: int
    soft: int
    hard: int


def _ceiling(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(_NR_OPEN.read_text().strip())
    except (OSError, ValueError):
        return _FALLBACK_CEILING


def raise_open_files_limit() -> OpenFilesLimit:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit (logged either way); a refusal
    leaves the limit as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling(hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("open files limit stays %d (raising it to %d failed: %s)", soft, target, exc)
            return OpenFilesLimit(soft, soft, hard)
        log.info("open files limit raised from %d to %d (the hard limit)", soft, target)
        return OpenFilesLimit(soft, target, hard)
    log.info("open files limit %d (hard limit %d)", soft, hard)
    return OpenFilesLimit(soft, soft, hard)
