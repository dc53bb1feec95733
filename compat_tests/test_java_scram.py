"""The Java client's Admin SCRAM API (what kafka-configs.sh --entity-type users calls) on a 3-node
kafkapy cluster where every listener is SASL_PLAINTEXT: a user created through node 1 produces
through node 3, a wrong password is refused, a deleted user is gone. See `test_java_client.py`
and `compat_tests/java/harness.py` for how the Java scenarios run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.conftest import unique_topic
from compat_tests.java.harness import JavaClient, java_build
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(
        tmp_path / "cluster", 3, security="SASL_PLAINTEXT",
        # the nodes and the admin use SCRAM-SHA-512; the new user logs in with SCRAM-SHA-256
        overrides={"sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256"},
    )  # fmt: skip
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def test_admin_creates_a_scram_user_that_logs_in_on_another_node(
    tmp_path_factory: pytest.TempPathFactory, cluster: ClusterProcesses
) -> None:
    admin = cluster.client_config
    java = JavaClient(java_build(tmp_path_factory), cluster.bootstrap_of(1))
    prefix = unique_topic("java-scram")
    events = java.run("scram", prefix, admin["sasl.username"], admin["sasl.password"], cluster.bootstrap_of(3))
    user = f"{prefix}-user"
    first, last = events.all("described")
    assert first == {**first, "user": user, "credentials": [["SCRAM-SHA-256", 8192]]}
    assert events.one("produced")["offset"] == 0
    assert "SaslAuthenticationException" in events.one("refused", what="wrong-password")["classes"]
    assert last == {**last, "user": user, "error": "ResourceNotFoundException"}
