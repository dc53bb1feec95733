"""Partition directory names: delete and move names always fit in 255 bytes and are recognised."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.storage.dirnames import (
    MAX_NAME_BYTES,
    delete_dir_name,
    future_dir_name,
    is_unfinished_dir_name,
    log_dir_name,
    parse_log_dir_name,
)

TOPIC_CHARS = "abcXYZ019._-"
INT32_MAX = 2**31 - 1

topics = st.text(alphabet=TOPIC_CHARS, min_size=1, max_size=249).filter(
    lambda t: t not in (".", ".."))
partitions = st.integers(min_value=0, max_value=INT32_MAX)


def test_every_topic_length_and_the_largest_partition_fit() -> None:
    for length in range(1, 250):
        for partition in (0, 9, 99_999, INT32_MAX):
            topic = "t" * length
            for name in (delete_dir_name(topic, partition), future_dir_name(topic, partition)):
                assert len(name.encode()) <= MAX_NAME_BYTES, (length, partition)
                assert is_unfinished_dir_name(name)
                assert parse_log_dir_name(name) is None  # never taken for a live log


@given(topic=topics, partition=partitions)
def test_capped_names_keep_the_suffix_and_are_unique(topic: str, partition: int) -> None:
    first, second = delete_dir_name(topic, partition), delete_dir_name(topic, partition)
    assert first != second
    assert first.endswith("-delete")
    assert future_dir_name(topic, partition).endswith("-future")
    assert f"-{partition}." in first
    prefix = first[: first.rindex(f"-{partition}.")]
    assert topic.startswith(prefix)
    if len(topic) + len(f"-{partition}.") + 32 + len("-delete") <= MAX_NAME_BYTES:
        assert prefix == topic  # shortened only when it would not fit


@given(topic=topics, partition=partitions)
def test_uncapped_names_written_before_the_cap_are_still_recognised(
    topic: str, partition: int
) -> None:
    old = f"{log_dir_name(topic, partition)}.{uuid.uuid4().hex}"
    assert is_unfinished_dir_name(old + "-delete")
    assert is_unfinished_dir_name(old + "-future")
    assert parse_log_dir_name(log_dir_name(topic, partition)) == (topic, partition)


def test_other_names_are_not_unfinished_deletes() -> None:
    for name in ("t-0", "t-delete", "-delete", "t-0.abc", "t-x.abc-delete", "t-0.a/b-delete",
                 "__cluster_metadata-0", ".lock"):
        assert not is_unfinished_dir_name(name), name
