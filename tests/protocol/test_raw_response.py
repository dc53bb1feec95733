"""RawResponse: its size is the bytes the connection will write after the header, file regions
counted by their length, and it names the fds it owns (closed by the connection once sent)."""

from __future__ import annotations

from kafkapy.protocol.raw_response import FileRegion, RawResponse


def test_size_counts_bytes_and_region_lengths_and_fds_are_the_regions() -> None:
    raw = RawResponse(segments=[b"abc", FileRegion(7, 100, 4096), bytearray(5), memoryview(b"xy"),
                                FileRegion(9, 0, 1)])
    assert raw.size == 3 + 4096 + 5 + 2 + 1
    assert raw.fds() == [7, 9]
    assert (RawResponse().size, RawResponse().fds(), RawResponse().flexible) == (0, [], False)
