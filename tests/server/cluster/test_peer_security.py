"""PeerClient over TLS and SASL (`PeerSecurity`), against a real in-process broker: what a node
does when the other nodes' inter-broker or controller listener is secured.

What the cluster relies on: requests flow once the TLS handshake and the SASL login are done
(PLAIN and SCRAM, large answers through the TLS stream too); a wrong password or an untrusted
certificate is a PeerError - logged, since it is an operator's mistake - never a hang.
"""

from __future__ import annotations

import ssl

import pytest

from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import MetadataRequest, ProduceRequest
from kafkapy.server.cluster.peer import PeerClient, PeerError
from kafkapy.server.security.inter_node import PeerSecurity
from kafkapy.testing.certs import CertFiles, make_certs
from tests.server.helpers import batch, running_broker

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _settings(certs: CertFiles) -> dict[str, str]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "kafkapy.sasl.users": "node:node-secret",
    }


def _context(certs: CertFiles, *, client_cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if client_cert:
        context.load_cert_chain(str(certs.server_pem))
    return context


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_requests_flow_after_tls_and_sasl(certs: CertFiles, mechanism: str) -> None:
    async with running_broker(None, **_settings(certs)) as (_broker, _server, port):
        security = PeerSecurity(_context(certs), mechanism, "node", "node-secret")
        client = PeerClient("127.0.0.1", port, client_id="peer-test", security=security)
        produce = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(
                index=0, records=batch(*[b"v" * 1000] * 300))])])  # fmt: skip
        answer = await client.request(ApiKey.PRODUCE, 9, produce, timeout_s=10)
        assert answer.responses[0].partition_responses[0].error_code == 0
        metadata = await client.request(ApiKey.METADATA, 9, MetadataRequest(topics=None), timeout_s=10)
        assert [t.name for t in metadata.topics if t.name == "t"] == ["t"]
        assert client.connected
        await client.aclose()


async def test_wrong_password_and_untrusted_peers_are_peer_errors(
    certs: CertFiles, tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    other = make_certs(tmp_path_factory.mktemp("other-ca"))  # a CA the broker does not trust
    async with running_broker(None, **_settings(certs)) as (_broker, _server, port):
        cases: list[tuple[PeerSecurity, str | None]] = [
            (PeerSecurity(_context(certs), "SCRAM-SHA-512", "node", "wrong"), "refused SASL"),
            (PeerSecurity(_context(certs), "PLAIN", "node", "wrong"), "refused SASL"),
            (PeerSecurity(_context(other), "PLAIN", "node", "node-secret"), "TLS handshake"),
            # no client certificate for ssl.client.auth=required: TLS 1.3 reports it on first read
            (PeerSecurity(_context(certs, client_cert=False), "PLAIN", "node", "node-secret"), None),
        ]
        for security, reason in cases:
            client = PeerClient("127.0.0.1", port, client_id="peer-test", security=security)
            with pytest.raises(PeerError, match=reason):
                await client.request(ApiKey.METADATA, 9, MetadataRequest(topics=None), timeout_s=10)
            assert not client.connected
            await client.aclose()
    assert "authentication to another node failed" in caplog.text
