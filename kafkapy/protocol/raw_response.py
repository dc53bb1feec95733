"""Responses made of pre-encoded bytes and file regions (the zero-copy path's data types).

Why: a Fetch response is mostly record batches that already sit in segment files in wire format.
The server sends them with `sendfile(2)` from the page cache to the socket without copying them
through Python (`kafkapy.server.zerocopy`); the response header and per-partition framing are
small `bytes` segments. This module only describes such a response - it opens, reads and closes
nothing.

`RawResponse.segments` is the response *after* the 4-byte size prefix and the response header;
the connection adds both. The fds of the file regions in a RawResponse belong to the response
(the fetch handler `dup`s them, so a segment deleted or closed meanwhile stays readable); the
connection closes them once the response was sent or dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SENDFILE_MIN_BYTES", "FileRegion", "RawResponse", "Segment"]

#: smaller file regions are read in and sent with the bytes around them (a sendfile call of its
#: own costs more than copying them); the Fetch handler reads them at once for the same reason
SENDFILE_MIN_BYTES = 4096


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`length` bytes at `position` of the open file `fd`."""

    fd: int
    position: int
    length: int


Segment = bytes | bytearray | memoryview | FileRegion


@dataclass(slots=True)
class RawResponse:
    """A response body built by hand (see module doc); `flexible` selects response header v1."""

    segments: list[Segment] = field(default_factory=list)
    flexible: bool = False
    #: error code -> how often the response carries it (for the per-API error metrics)
    error_counts: dict[int, int] | None = None

    def fds(self) -> list[int]:
        return [s.fd for s in self.segments if isinstance(s, FileRegion)]

    @property
    def size(self) -> int:
        return sum(s.length if isinstance(s, FileRegion) else len(s) for s in self.segments)
