"""The consumer-protocol Assignment parser behind `kafkapy groups describe`."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.cli.groups import decode_assignment


def encode_assignment(parts: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for topic, ps in parts.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", len(user_data)) + user_data


@given(st.dictionaries(st.text(min_size=1, max_size=10), st.lists(st.integers(0, 1000), max_size=5),
                       max_size=4), st.binary(max_size=10))
def test_round_trip(parts: dict[str, list[int]], user_data: bytes) -> None:
    decoded = decode_assignment(encode_assignment(parts, user_data))
    assert decoded == [(t, p) for t, ps in parts.items() for p in ps]


@given(st.binary(max_size=60))
def test_garbage_gives_a_list_never_an_exception(data: bytes) -> None:
    assert isinstance(decode_assignment(data), list)


def test_empty_assignment_has_no_partitions() -> None:
    assert decode_assignment(b"") == []
