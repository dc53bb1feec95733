"""Finalized feature levels: the controller's bootstrap records, their replay and snapshots."""

from __future__ import annotations

import pytest

from kafkapy.controller.features import (
    BOOTSTRAP_LEVELS,
    METADATA_VERSION_4_0_IV3,
    SUPPORTED_FEATURES,
)
from kafkapy.controller.image import MetadataApplyError, MetadataImage
from kafkapy.controller.records import FeatureLevelRecord, decode_record, encode_record
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot, image_records
from kafkapy.protocol.errors import ProtocolError
from tests.controller.helpers import Cluster


def test_a_new_cluster_bootstraps_metadata_version_first_then_group_version() -> None:
    c = Cluster()
    result = c.ctl.bootstrap_features()
    assert result.records == [
        FeatureLevelRecord("metadata.version", 25),
        FeatureLevelRecord("group.version", 1),
    ]
    assert c.ctl.needs_bootstrap is False
    c.run(result)  # the replica replays the bytes and agrees with the controller
    assert c.replica.features == {"metadata.version": 25, "group.version": 1}
    assert c.replica.offset == 1
    # a later operation's records follow at the next offsets
    assert c.register(1) == 2


def test_bootstrap_is_written_once() -> None:
    c = Cluster()
    c.run(c.ctl.bootstrap_features())
    assert c.ctl.bootstrap_features().records == []


def test_an_existing_log_without_metadata_version_gets_it_and_keeps_its_state() -> None:
    """A data dir from a kafkapy that finalized nothing: its image has brokers and topics but
    no features; the new active controller adds the levels and nothing else changes."""
    c = Cluster()
    c.register(1)
    assert c.ctl.needs_bootstrap
    brokers_before = dict(c.ctl.image.brokers)
    c.run(c.ctl.bootstrap_features())
    assert c.replica.features == dict(BOOTSTRAP_LEVELS)
    assert c.ctl.image.brokers == brokers_before


def test_a_level_changed_after_bootstrap_is_not_rewritten() -> None:
    image = MetadataImage()
    image.apply(FeatureLevelRecord("metadata.version", 25), 0)
    image.apply(FeatureLevelRecord("group.version", 0), 1)  # level 0 takes it away
    assert image.features == {"metadata.version": 25}
    c = Cluster()
    c.ctl = type(c.ctl)(c.ctl.config, image)
    assert not c.ctl.needs_bootstrap
    assert c.ctl.bootstrap_features().records == []


def test_a_negative_level_is_refused_and_changes_nothing() -> None:
    image = MetadataImage()
    image.apply(FeatureLevelRecord("metadata.version", 25), 0)
    with pytest.raises(MetadataApplyError, match="negative level"):
        image.apply(FeatureLevelRecord("metadata.version", -1), 1)
    assert image.features == {"metadata.version": 25}
    assert image.offset == 0


def test_feature_level_record_bytes_are_kafkas_type_and_int16_range() -> None:
    data = encode_record(FeatureLevelRecord("metadata.version", 25))
    assert data[:3] == b"\x00\x0c\x00"  # frame 0, Kafka's FeatureLevelRecord api key 12, v0
    assert decode_record(data) == FeatureLevelRecord("metadata.version", 25)
    with pytest.raises(ProtocolError, match="out of range for int16"):
        decode_record(encode_record(FeatureLevelRecord("x", 1 << 15)))


def test_snapshot_carries_finalized_levels_first() -> None:
    c = Cluster()
    c.register(1)
    c.run(c.ctl.bootstrap_features())
    image = c.replica
    data = encode_snapshot(image, end_offset=image.offset + 1, epoch=3, timestamp_ms=0)
    _, restored = decode_snapshot(data)
    assert restored.features == {"metadata.version": 25, "group.version": 1}
    assert restored.brokers == image.brokers
    first = next(image_records(image))
    assert first == FeatureLevelRecord("metadata.version", 25)


def test_supported_ranges_hold_the_bootstrap_levels() -> None:
    for name, level in BOOTSTRAP_LEVELS.items():
        lo, hi = SUPPORTED_FEATURES[name]
        assert lo <= level <= hi
    assert SUPPORTED_FEATURES["metadata.version"] == (METADATA_VERSION_4_0_IV3,) * 2
    # levels kafkapy does not implement are neither supported nor finalized
    for absent in ("transaction.version", "kraft.version", "eligible.leader.replicas.version"):
        assert absent not in SUPPORTED_FEATURES
        assert absent not in BOOTSTRAP_LEVELS
