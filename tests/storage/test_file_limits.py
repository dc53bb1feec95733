"""The open-files limit a node starts with: raised to the hard limit, and said in the log."""

from __future__ import annotations

import logging
import resource
from collections.abc import Iterator

import pytest

from kafkapy.storage.file_limits import raise_open_files_limit


@pytest.fixture
def low_soft_limit() -> Iterator[int]:
    """The soft limit lowered to 256 for the test (the default `ulimit -n` of many systems is
    1,024), restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:
        yield hard
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_soft_limit_is_raised_to_the_hard_limit(low_soft_limit: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkapy.storage.file_limits"):
        limit = raise_open_files_limit()
    assert limit.before == 256
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == limit.soft > 256
    if low_soft_limit != resource.RLIM_INFINITY:
        assert limit.soft == low_soft_limit
    assert f"raised from 256 to {limit.soft}" in caplog.text


def test_a_limit_already_at_the_hard_limit_is_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    raise_open_files_limit()
    before = resource.getrlimit(resource.RLIMIT_NOFILE)
    with caplog.at_level(logging.INFO, logger="kafkapy.storage.file_limits"):
        limit = raise_open_files_limit()
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == before
    assert limit.before == limit.soft
    assert "open files limit" in caplog.text
