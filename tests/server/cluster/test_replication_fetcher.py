"""The replica fetcher's byte handling: only whole batches reach append_as_follower."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.records import Record, build_batch, iter_batches
from kafkapy.server.cluster.replica_fetcher import whole_batches


def _batches(sizes: list[int]) -> tuple[bytes, list[int]]:
    """Concatenated batches with consecutive offsets, and the end position of each."""
    out = bytearray()
    ends = []
    offset = 0
    for n in sizes:
        records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v" * (i + 1), headers=[])
                   for i in range(n)]
        out += build_batch(records, base_offset=offset, base_timestamp=1_700_000_000_000)
        offset += n
        ends.append(len(out))
    return bytes(out), ends


@settings(max_examples=60)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=6), cut=st.integers(0, 10_000))
def test_a_cut_response_keeps_exactly_the_complete_batches(sizes: list[int], cut: int) -> None:
    data, ends = _batches(sizes)
    cut = min(cut, len(data))
    kept = bytes(whole_batches(data[:cut]))
    complete = [e for e in ends if e <= cut]
    assert len(kept) == (complete[-1] if complete else 0)
    assert kept == data[: len(kept)]
    assert len(list(iter_batches(kept))) == len(complete)


def test_whole_input_is_returned_as_it_is() -> None:
    data, _ = _batches([2, 3])
    assert whole_batches(data) is data


@given(garbage=st.binary(max_size=200))
def test_garbage_never_raises(garbage: bytes) -> None:
    kept = whole_batches(garbage)
    assert len(kept) <= len(garbage)
