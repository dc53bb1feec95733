"""What `PartitionLog` hands back: appended offsets, and file slices for zero-copy reads.

Why slices and not bytes: a fetch answer is mostly record batches that are already on disk in
wire format, so the server sends `FileSlice`s with `os.sendfile` straight from the page cache to
the socket; `FileSlice.read()` is the copying fallback (tests, replication, the cleaner).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.protocol.records import BatchHeader
    from kafkapy.storage.config import LogConfig

__all__ = ["AppendResult", "FileSlice", "ReadResult", "ValidatedBatches"]


# Not frozen (nor ReadResult): a frozen dataclass's __init__ costs several times a plain one's,
# and every Fetch builds both per partition read. Treat them as read-only all the same.
@dataclasses.dataclass(slots=True)
class FileSlice:
    """`length` bytes of whole batches at `position` of the open file `fd` (for os.sendfile)."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        """The slice's bytes (short if the file was truncated meanwhile)."""
        parts: list[bytes] = []
        done = 0
        while done < self.length:
            chunk = os.pread(self.fd, self.length - done, self.position + done)
            if not chunk:
                break
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)


@dataclasses.dataclass(slots=True)
class ReadResult:
    """What a fetch from one partition gets: slices plus the offsets the response reports."""

    slices: list[FileSlice]
    first_offset: int  # base offset of the first batch returned (-1 when empty)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int

    @property
    def size(self) -> int:
        return sum(s.length for s in self.slices)


# Not frozen: a frozen dataclass's __init__ costs ~1 us more, paid on every produce.
@dataclasses.dataclass(slots=True)
class AppendResult:
    """Outcome of an append. `flush_needed`: the config asks for an fsync before the ack
    (`flush.messages` reached); the server then runs `flush()` in a worker thread."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    batches: int
    flush_needed: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ValidatedBatches:
    """A client's batches after `PartitionLog.validate`: framed, CRC-checked and every record
    walked under `config` (the topic config when validated; a change after that counts as after
    the produce). `data` holds the bytes to write, max timestamps already recomputed; `append`
    only numbers and writes them. Why a value of its own: the walk of a large or compressed
    batch runs in a worker thread, the write on the event loop under the log's lock."""

    data: bytearray | memoryview
    headers: list[tuple[int, BatchHeader]]
    config: LogConfig
