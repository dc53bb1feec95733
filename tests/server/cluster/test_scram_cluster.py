"""SCRAM credentials in a three-node cluster: altered through any broker (forwarded to the active
controller), in every node's image, described by every broker, checked by every node's logins.
Real clients on real subprocess nodes: compat_tests/test_security.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafkapy.protocol.sasl import ScramClient, ScramServer
from kafkapy.testing.local import open_cluster
from tests.server.helpers import Client

pytestmark = pytest.mark.timeout(150)

Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def _upsert(name: str, password: str) -> Upsert:
    salt = b"salt-of-" + name.encode()
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 4096)
    return Upsert(name=name, mechanism=2, iterations=4096, salt=salt, salted_password=salted)


async def test_a_credential_altered_through_one_broker_logs_in_on_every_node(
    tmp_path: Path,
) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            clients = [await Client.connect(n.broker_port) for n in nodes]
            # through a broker that is not the active controller, so the request is forwarded
            first = nodes[0].broker.cluster
            sender = next(i for i, n in enumerate(nodes) if n.node_id != first.raft.leader_id)
            altered = await clients[sender].request(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                AlterUserScramCredentialsRequest(upsertions=[_upsert("gina", "gina-pw")]),
            )  # fmt: skip
            assert [(r.user, r.error_code) for r in altered.results] == [("gina", ErrorCode.NONE)]
            for node in nodes:
                cluster = node.broker.cluster
                assert await cluster.publisher.wait_for(
                    lambda image: ("gina", "SCRAM-SHA-512") in image.scram_credentials, 10
                )
                store = node.broker.credentials
                server = ScramServer("SCRAM-SHA-512", lambda u, s=store: s.scram("SCRAM-SHA-512", u))
                scram = ScramClient("SCRAM-SHA-512", "gina", "gina-pw")
                final = scram.final_message(server.evaluate(scram.first()))
                scram.final(server.evaluate(final))
                assert server.principal == "gina"
            for c in clients:
                described = await c.request(
                    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest()
                )
                assert [
                    (r.user, [(i.mechanism, i.iterations) for i in r.credential_infos])
                    for r in described.results
                ] == [("gina", [(2, 4096)])]
            deleted = await clients[-1].request(
                ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
                AlterUserScramCredentialsRequest(deletions=[Delete(name="gina", mechanism=2)]),
            )  # fmt: skip
            assert [r.error_code for r in deleted.results] == [ErrorCode.NONE]
            for node in nodes:
                cluster = node.broker.cluster
                assert await cluster.publisher.wait_for(
                    lambda image: not image.scram_credentials, 10
                )
                assert node.broker.credentials.scram("SCRAM-SHA-512", "gina") is None
            for c in clients:
                await c.aclose()
