"""Start-up check of the data directories (`log.dirs`), with what is wrong in plain words.

Why before the broker opens them: the storage layer's own failure is an errno deep in a
lock-file or segment open ("[Errno 17] File exists: 'data'"), which names neither the setting
nor the fix. This check creates each directory, proves it can hold a file (write, fsync, delete)
and turns each way that fails into one sentence naming the path and what to do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["DataDirError", "check_data_dir"]

_KERNEL_FILE_SYSTEMS = ("/proc", "/sys", "/dev")


class DataDirError(ValueError):
    """A data directory kafkapy cannot use; the message says why and what to do."""


def _inside(path: Path, root: str) -> bool:
    return path == Path(root) or Path(root) in path.parents


def _explain(path: Path, e: OSError) -> str:
    fix = "point log.dirs (--data-dir) at a directory you can write to"
    if e.errno == errno.EROFS:
        return f"data directory {path} is on a read-only file system: {fix}"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"no permission to write in data directory {path}: {fix} (or fix its permissions)"
    if e.errno == errno.ENOTDIR or e.errno == errno.EEXIST:
        blocker = next((p for p in [path, *path.parents] if p.exists() and not p.is_dir()), path)
        return f"data directory {path} cannot be a directory: {blocker} is a file: {fix}"
    if e.errno == errno.ENOSPC:
        return f"data directory {path} is on a full disk: free space or {fix}"
    return f"data directory {path} cannot be used: {e.strerror or e}: {fix}"


def check_data_dir(path: Path) -> None:
    """Create `path` if needed and prove a file can be written there; DataDirError if not."""
    absolute = Path(os.path.abspath(path))
    for root in _KERNEL_FILE_SYSTEMS:
        if _inside(absolute, root):
            raise DataDirError(
                f"data directory {path} is inside {root}, a kernel file system that cannot hold "
                "data: point log.dirs (--data-dir) at a directory on a disk"
            )
    probe = absolute / ".kafkapy-write-check"
    try:
        absolute.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"kafkapy")
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as e:
        raise DataDirError(_explain(path, e)) from None
