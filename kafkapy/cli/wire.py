"""A small blocking Kafka admin client on the project's own codecs: connections and routing.

Why our own codec over a plain socket: the admin commands must work with nothing but kafkapy
installed (no client library), and they double as a check that our codec speaks to a broker as a
client would. Each `KafkaWireClient` is one socket to one broker: it negotiates versions with
ApiVersions, optionally wraps the socket in TLS and authenticates with SASL (PLAIN,
SCRAM-SHA-256/512) from the client properties, and sends one request at a time.

`Admin` is the cluster view on top: it starts from the first bootstrap server that answers, learns
the brokers from Metadata, and routes requests to a partition's leader, a group's coordinator or
any broker (which forwards controller requests in KRaft), opening one connection per broker.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from kafkapy.cli.common import ClientSettings, CliError, check, jaas_options
from kafkapy.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
)
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafkapy.protocol.sasl import SaslError, ScramClient, plain_token

__all__ = ["Admin", "KafkaWireClient", "split_host_port"]

M = TypeVar("M")
_SIZE = struct.Struct(">i")
CONNECT_TIMEOUT_S = 5.0
_SILENT_HINT = (
    "is it a Kafka listener, with the security.protocol it expects (PLAINTEXT, SSL, SASL_*)? "
    "set it in --command-config"
)
GROUP, TRANSACTION = 0, 1


def split_host_port(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit():
        raise CliError(f"a bootstrap server must be HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


class KafkaWireClient:
    """A blocking Kafka protocol client over one socket (TLS and SASL from `properties`).

    Resource handling: use as a context manager; the socket closes on exit.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "kafkapy-cli",
        timeout_s: float = 30.0,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        host, port = split_host_port(bootstrap.split(",")[0])
        self.address = f"{host}:{port}"
        props = dict(properties or {})
        try:
            raw = socket.create_connection((host, port), timeout=min(timeout_s, CONNECT_TIMEOUT_S))
        except OSError as e:
            raise CliError(
                f"cannot connect to {self.address}: {e.strerror or e}",
                hint="is a broker running there? (start one with `kafkapy serve`; "
                "set --bootstrap-server or KAFKAPY_BOOTSTRAP_SERVERS)",
            ) from None
        # set-up (TLS, ApiVersions, SASL) gets the short timeout too: a port that accepts but
        # does not answer as a Kafka broker is reported in seconds, not after a request timeout
        raw.settimeout(min(timeout_s, CONNECT_TIMEOUT_S))
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        try:
            self.sock = _tls_wrap(raw, host, props) if protocol in ("SSL", "SASL_SSL") else raw
        except TimeoutError:
            raw.close()
            raise CliError(f"TLS to {self.address} failed: no handshake answer",
                           hint=_SILENT_HINT) from None
        except (OSError, ssl.SSLError) as e:
            raw.close()
            raise CliError(f"TLS to {self.address} failed: {e}") from None
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self.versions: dict[int, int] = {}
        try:
            self._negotiate()
            if protocol.startswith("SASL_"):
                self._authenticate(props)
        except BaseException:
            self.sock.close()
            raise
        self.sock.settimeout(timeout_s)

    def _negotiate(self) -> None:
        try:
            response = self.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        except CliError as e:
            raise CliError(f"{self.address} does not answer as a Kafka broker ({e})", hint=_SILENT_HINT) from None
        assert isinstance(response, ApiVersionsResponse)
        for v in response.api_keys:
            try:
                ours = SUPPORTED_VERSIONS.get(ApiKey(v.api_key))
            except ValueError:  # an API newer than our codec
                continue
            if ours is not None and max(ours[0], v.min_version) <= min(ours[1], v.max_version):
                self.versions[v.api_key] = min(ours[1], v.max_version)

    def _authenticate(self, props: Mapping[str, str]) -> None:
        mechanism = props.get("sasl.mechanism", "PLAIN").upper()
        user, password = _sasl_credentials(props)
        hs: SaslHandshakeResponse = self.send(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism)
        )
        check(hs.error_code, f"SASL {mechanism} (the broker enables {', '.join(hs.mechanisms)})")
        if mechanism == "PLAIN":
            self._sasl_step(plain_token(user, password))
        elif mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            scram = ScramClient(mechanism, user, password)
            try:
                scram.final(self._sasl_step(scram.final_message(self._sasl_step(scram.first()))))
            except SaslError as e:
                raise CliError(f"SASL {mechanism}: {e.reason}") from None
        else:
            raise CliError(f"sasl.mechanism {mechanism} is not supported by kafkapy's CLI")

    def _sasl_step(self, token: bytes) -> bytes:
        r: SaslAuthenticateResponse = self.call(
            ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=token)
        )
        check(r.error_code, "SASL authentication", r.error_message)
        return bytes(r.auth_bytes)

    def __enter__(self) -> KafkaWireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def version(self, api_key: ApiKey, cap: int | None = None) -> int:
        if api_key not in self.versions:
            raise CliError(f"the broker at {self.address} does not support {api_key.name}")
        v = self.versions[api_key]
        return v if cap is None else min(v, cap)

    def send(self, api_key: ApiKey, version: int, msg: Any) -> Any:
        correlation_id = next(self._correlation)
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), msg)
        try:
            self.sock.sendall(_SIZE.pack(len(frame)) + frame)
            size = _SIZE.unpack(self._read(4))[0]
            got, response = decode_response(api_key, version, self._read(size))
        except (OSError, ProtocolError) as e:
            raise CliError(f"{api_key.name} to {self.address} failed: {e}") from None
        if got != correlation_id:
            raise CliError(f"{api_key.name}: correlation id {got}, expected {correlation_id}")
        return response

    def call(self, api_key: ApiKey, msg: Any, cap: int | None = None) -> Any:
        """Send `msg` at the highest version both sides speak (at most `cap`)."""
        return self.send(api_key, self.version(api_key, cap), msg)

    def _read(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise OSError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


def _tls_wrap(raw: socket.socket, host: str, props: Mapping[str, str]) -> socket.socket:
    ca = props.get("ssl.ca.location")
    if ca is None and props.get("ssl.truststore.type", "").upper() == "PEM":
        ca = props.get("ssl.truststore.location")
    context = ssl.create_default_context(cafile=ca)
    if props.get("ssl.endpoint.identification.algorithm", "https").lower() in ("", "none"):
        context.check_hostname = False
    cert = props.get("ssl.certificate.location")
    if cert:
        context.load_cert_chain(cert, props.get("ssl.key.location"), props.get("ssl.key.password"))
    return context.wrap_socket(raw, server_hostname=host)


def _sasl_credentials(props: Mapping[str, str]) -> tuple[str, str]:
    user, password = props.get("sasl.username"), props.get("sasl.password")
    if (user is None or password is None) and "sasl.jaas.config" in props:
        options = jaas_options(props["sasl.jaas.config"])
        user, password = options.get("username"), options.get("password")
    if user is None or password is None:
        raise CliError(
            "SASL needs a user and password: set sasl.username and sasl.password "
            "(or sasl.jaas.config) in --command-config"
        )
    return user, password


class Admin:
    """The cluster through one connection per broker, routed like Kafka's admin client."""

    def __init__(self, settings: ClientSettings, client_id: str = "kafkapy-cli") -> None:
        self.settings = settings
        self.client_id = client_id
        self._conns: dict[int, KafkaWireClient] = {}
        self.brokers: dict[int, str] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        failures: list[str] = []
        servers = settings.servers or [settings.bootstrap]
        for address in servers:
            try:
                self.bootstrap = self._connect(address)
                break
            except CliError as e:
                failures.append(str(e))
        else:
            raise CliError("; ".join(failures) if len(failures) > 1 else failures[0])

    def _connect(self, address: str) -> KafkaWireClient:
        return KafkaWireClient(
            address,
            client_id=self.client_id,
            timeout_s=max(self.settings.timeout_s, 30.0),
            properties=self.settings.properties,
        )

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.bootstrap.close()
        for conn in self._conns.values():
            if conn is not self.bootstrap:
                conn.close()
        self._conns.clear()

    def call(self, api_key: ApiKey, msg: Any, cap: int | None = None) -> Any:
        """Send to the bootstrap broker (any broker serves or forwards admin requests)."""
        return self.bootstrap.call(api_key, msg, cap)

    def metadata(self, topics: Iterable[str] | None = None) -> MetadataResponse:
        """Metadata for `topics` (None: all) - never auto-creates a topic."""
        request = MetadataRequest(
            topics=None
            if topics is None
            else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        response: MetadataResponse = self.call(ApiKey.METADATA, request, cap=12)
        self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        self.controller_id = response.controller_id
        self.cluster_id = response.cluster_id
        return response

    def broker(self, node_id: int) -> KafkaWireClient:
        """A connection to broker `node_id` (learnt from Metadata)."""
        if node_id in self._conns:
            return self._conns[node_id]
        if node_id not in self.brokers:
            self.metadata([])
        if node_id not in self.brokers:
            raise CliError(f"broker {node_id} is not in the cluster's metadata")
        address = self.brokers[node_id]
        conn = self.bootstrap if address == self.bootstrap.address else self._connect(address)
        self._conns[node_id] = conn
        return conn

    def coordinator(self, key: str, key_type: int = GROUP) -> KafkaWireClient:
        """A connection to the group (or transaction) coordinator of `key`."""
        return self.broker(self.find_coordinator(key, key_type))

    def find_coordinator(self, key: str, key_type: int = GROUP) -> int:
        """The node id of the group (or transaction) coordinator of `key`."""
        r: FindCoordinatorResponse = self.call(
            ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])
        )
        if r.coordinators:
            c = r.coordinators[0]
            check(c.error_code, f"no coordinator for {key}", c.error_message)
            node, host, port = c.node_id, c.host, c.port
        else:
            check(r.error_code, f"no coordinator for {key}", r.error_message)
            node, host, port = r.node_id, r.host, r.port
        self.brokers.setdefault(node, f"{host}:{port}")
        return int(node)

    def leaders(self, topics: Iterable[str]) -> dict[tuple[str, int], int]:
        """The leader of every partition of `topics` (UNKNOWN_TOPIC_OR_PARTITION if one is missing)."""
        names = list(dict.fromkeys(topics))
        out: dict[tuple[str, int], int] = {}
        for t in self.metadata(names).topics:
            check(t.error_code, f"topic {t.name}")
            for p in t.partitions:
                out[(str(t.name), p.partition_index)] = p.leader_id
        return out

    def topic_partitions(self, topic: str) -> list[int]:
        return sorted(p for t, p in self.leaders([topic]) if t == topic)

    def by_leader(
        self, partitions: Iterable[tuple[str, int]]
    ) -> dict[int, list[tuple[str, int]]]:
        """`partitions` grouped by their leader's node id (-1: no leader now)."""
        wanted = list(partitions)
        leaders = self.leaders(t for t, _ in wanted)
        out: dict[int, list[tuple[str, int]]] = {}
        for tp in wanted:
            if tp not in leaders:
                raise CliError(f"{tp[0]}-{tp[1]}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            out.setdefault(leaders[tp], []).append(tp)
        return out
