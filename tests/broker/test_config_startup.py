"""Start-up validation of the broker configuration and the data directories."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker import data_dirs
from kafkapy.broker.config import (
    _AT_LEAST,
    BROKER_CONFIGS,
    BrokerConfig,
    ConfigError,
    parse_properties,
    property_lines,
    unknown_key_message,
)
from kafkapy.broker.data_dirs import DataDirError, check_data_dir


def test_every_lower_bound_names_a_known_key() -> None:
    assert set(_AT_LEAST) <= set(BROKER_CONFIGS)


@pytest.mark.parametrize(("key", "value"), [
    ("num.partitions", "0"), ("default.replication.factor", "0"), ("offsets.topic.num.partitions", "-1"),
    ("log.segment.bytes", "13"), ("min.insync.replicas", "0"),
])
def test_out_of_range_values_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid value {value} for {key}: must be at least"):
        BrokerConfig({key: value})


def test_values_at_the_bound_are_taken() -> None:
    assert BrokerConfig({"num.partitions": "1"}).get_int("num.partitions") == 1


def test_unknown_key_is_a_warning_with_a_suggestion(caplog: pytest.LogCaptureFixture) -> None:
    assert unknown_key_message("num.partitons").endswith("did you mean num.partitions?")
    assert "did you mean" not in unknown_key_message("completely.different.thing")
    with caplog.at_level(logging.WARNING, logger="kafkapy.broker.config"):
        BrokerConfig({"log.retention.hour": "5"})
    assert any(r.levelno == logging.WARNING and "did you mean log.retention.hours?" in r.getMessage()
               for r in caplog.records)


def test_file_errors_name_the_file_and_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# comment\nlog.dirs=/tmp/x\nnum.partitons=3\n\nnum.partitions = \\\n  lots\n")
    with pytest.raises(ConfigError, match=f"^{props}:5: invalid value 'lots' for num.partitions"):
        BrokerConfig.load(props)
    props.write_text("default.replication.factor=0\n")
    with pytest.raises(ConfigError, match=f"^{props}:1: invalid value 0"):
        BrokerConfig.load(props)
    # a later source overriding the bad value wins, as the documented order says
    assert BrokerConfig.load(props, overrides={"default.replication.factor": "1"}).get_int(
        "default.replication.factor") == 1
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing\.properties: No such file"):
        BrokerConfig.load(tmp_path / "missing.properties")
    (tmp_path / "binary.properties").write_bytes(b"a=\xff\xfe\n")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        BrokerConfig.load(tmp_path / "binary.properties")


_KEY = st.text(alphabet="abcdefgh.", min_size=1, max_size=8)


@given(st.lists(st.tuples(_KEY, st.text(alphabet="xyz 1", max_size=5), st.booleans()), max_size=6))
def test_property_lines_agree_with_the_parser(entries: list[tuple[str, str, bool]]) -> None:
    lines: list[str] = []
    for key, value, continued in entries:
        lines.append("# a comment")
        lines.extend([f"{key}=\\", f"  {value}"] if continued else [f"{key}={value}"])
    text = "\n".join(lines) + "\n"
    where = property_lines(text)
    assert set(where) == set(parse_properties(text))
    for key, n in where.items():
        assert text.splitlines()[n - 1].startswith(f"{key}=")


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataDirError, match="is a file"):
        check_data_dir(tmp_path / "f")
    with pytest.raises(DataDirError, match=f"{tmp_path / 'f'} is a file"):
        check_data_dir(tmp_path / "f" / "sub")


@pytest.mark.parametrize("path", ["/proc/kafkapy", "/sys/data", "/dev/shm/../kafkapy", "/proc"])
def test_data_dir_inside_a_kernel_file_system(path: str) -> None:
    with pytest.raises(DataDirError, match="kernel file system"):
        check_data_dir(Path(path))


@pytest.mark.parametrize(("code", "words"), [
    (errno.EROFS, "read-only file system"), (errno.EACCES, "no permission to write"),
    (errno.ENOSPC, "full disk"),
])
def test_data_dir_write_failures_in_plain_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    """The errno the kernel gives for a read-only mount, a directory we may not write and a full
    disk (root on this machine can write anywhere, so the open is made to fail as it would)."""
    def refuse(*args: object, **kwargs: object) -> int:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(data_dirs.os, "open", refuse)
    with pytest.raises(DataDirError, match=words):
        check_data_dir(tmp_path / "d")


def test_a_usable_data_dir_is_created_and_left_clean(tmp_path: Path) -> None:
    check_data_dir(tmp_path / "new" / "data")
    assert list((tmp_path / "new" / "data").iterdir()) == []
