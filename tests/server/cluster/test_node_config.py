"""Cluster-mode configuration: when cluster mode is on, what it reads, and one clear error for
each inconsistency a user can write (docs/cluster.md).

What users rely on: a single-node KRaft file stays a single node; the same three-line change on
every node (voters, node id, listeners) makes a cluster; a mistake fails at start-up naming the
key, instead of an election loop later.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.config import BrokerConfig, ConfigError, parse_voters

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293"


def member(node_id: int = 1, **extra: str) -> dict[str, str]:
    settings = {
        "node.id": str(node_id),
        "controller.quorum.voters": VOTERS,
        "listeners": f"PLAINTEXT://127.0.0.1:{9092 + 100 * (node_id - 1)},CONTROLLER://127.0.0.1:{9093 + 100 * (node_id - 1)}",
    }
    settings.update(extra)
    return settings


def test_a_lone_node_is_a_quorum_of_one() -> None:
    """`kafkapy serve` with no voters (or only itself as a voter) is a combined broker +
    controller whose quorum is itself: no controller listener is needed, and one named in
    `listeners` is served as the voter's."""
    for explicit, voters, controller_listeners in (
        ({}, {1: None}, []),
        ({"controller.quorum.bootstrap.servers": "localhost:9093"}, {1: None}, []),
        ({"controller.quorum.voters": "1@localhost:9093"}, {1: ("localhost", 9093)}, []),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
            {1: ("127.0.0.1", 9093)},
            ["CONTROLLER"],
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "1@localhost:9093"},
            {1: ("localhost", 9093)},
            ["CONTROLLER"],
        ),
    ):
        config = BrokerConfig(explicit)
        cluster = config.cluster
        assert cluster.quorum_of_one
        assert cluster.voters == voters
        assert cluster.voters_configured == any(v is not None for v in voters.values())
        assert cluster.is_broker
        assert cluster.is_controller
        assert cluster.inter_broker_listener_name == "PLAINTEXT"
        assert [lst.name for lst in config.listeners] == ["PLAINTEXT"]
        assert [lst.name for lst in config.controller_listeners] == controller_listeners


def test_a_lone_node_with_no_plaintext_listener_needs_no_inter_broker_listener() -> None:
    """A quorum of one has no other broker to talk to, so a node serving SASL_SSL only starts
    (its first listener stands in for the inter-broker one); a cluster member would not."""
    listeners = {"listeners": "SASL_SSL://127.0.0.1:9092"}
    assert BrokerConfig(listeners).cluster.inter_broker_listener_name == "SASL_SSL"
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol PLAINTEXT"):
        BrokerConfig(member(1, listeners="SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"))


def test_three_voters_make_a_cluster_with_typed_settings() -> None:
    config = BrokerConfig(member(2, **{
        "replica.lag.time.max.ms": "10000", "min.insync.replicas": "2", "default.replication.factor": "3",
    }))
    cluster = config.cluster
    assert not cluster.quorum_of_one
    assert cluster.node_id == 2
    assert cluster.voters == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9193), 3: ("127.0.0.1", 9293)}
    assert cluster.is_broker
    assert cluster.is_controller
    assert cluster.is_voter
    assert cluster.controller_listener_name == "CONTROLLER"
    assert cluster.inter_broker_listener_name == "PLAINTEXT"
    assert (cluster.replica_lag_time_max_ms, cluster.min_insync_replicas, cluster.default_replication_factor) == (10000, 2, 3)
    # the defaults docs/cluster.md promises
    assert (cluster.session_timeout_ms, cluster.heartbeat_interval_ms) == (9000, 2000)
    assert (cluster.election_timeout_ms, cluster.fetch_timeout_ms, cluster.replica_fetch_wait_max_ms) == (1000, 2000, 500)
    assert cluster.unclean_leader_election is False
    assert [(lst.name, lst.port) for lst in config.listeners] == [("PLAINTEXT", 9192)]
    assert [(lst.name, lst.port) for lst in config.controller_listeners] == [("CONTROLLER", 9193)]
    assert "CONTROLLER" in config.controller_listener_names


def test_broker_only_node_is_a_cluster_member_without_a_controller_listener() -> None:
    config = BrokerConfig({
        "node.id": "4", "process.roles": "broker", "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "PLAINTEXT://127.0.0.1:9392",
    })
    assert config.cluster is not None
    assert config.cluster.is_broker
    assert not config.cluster.is_controller
    assert not config.cluster.is_voter


def test_controller_only_node_needs_no_broker_listener() -> None:
    config = BrokerConfig(member(1, **{"process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093"}))
    assert config.cluster is not None
    assert not config.cluster.is_broker
    assert config.listeners == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (member(5), "node.id 5 has the controller role but is not in controller.quorum.voters"),
        (member(1, **{"process.roles": "broker"}), "process.roles lacks controller"),
        (member(1, listeners="PLAINTEXT://127.0.0.1:9092"), "controller listener CONTROLLER"),
        (member(1, **{"inter.broker.listener.name": "INTERNAL"}), "inter.broker.listener.name INTERNAL"),
        (member(1, **{"process.roles": "broker,zookeeper"}), "process.roles"),
        (member(1, **{"controller.quorum.voters": "1@a:1,x@b:2"}), "expected ID@HOST:PORT"),
        (member(1, **{"controller.quorum.voters": "1@a:1,1@b:2"}), "names node 1 twice"),
        (
            {"controller.quorum.bootstrap.servers": "a:1,b:2", "listeners": "PLAINTEXT://127.0.0.1:9092"},
            "needs controller.quorum.voters",
        ),
        ({"process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:9092"}, "needs controller.quorum.voters"),
    ],
)
def test_inconsistent_cluster_settings_are_one_clear_error(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(settings)


@settings(max_examples=60)
@given(st.dictionaries(
    st.integers(0, 2**31 - 1),
    st.tuples(st.sampled_from(["localhost", "10.0.0.1", "[::1]", "kafka-1.example"]), st.integers(1, 65535)),
    max_size=6,
))
def test_voters_round_trip(voters: dict[int, tuple[str, int]]) -> None:
    text = ",".join(f"{i}@{h}:{p}" for i, (h, p) in voters.items())
    assert parse_voters(text) == {i: (h.strip("[]"), p) for i, (h, p) in voters.items()}


@settings(max_examples=100)
@given(st.text(max_size=40))
def test_voters_parse_or_raise_config_error(text: str) -> None:
    try:
        voters = parse_voters(text)
    except ConfigError:
        return
    assert all(i >= 0 and 0 <= p <= 65535 for i, (_, p) in voters.items())
