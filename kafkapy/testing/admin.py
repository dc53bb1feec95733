"""KafkaAdmin: create, delete and list topics (and set client quotas) on any Kafka broker, with
kafkapy's own codec.

Why not a client library: the pytest fixtures must work for a user of any client (or none), so
topic set-up cannot depend on confluent-kafka or kafka-python. This speaks the Kafka protocol
over a blocking socket to the first reachable bootstrap address - the same requests an admin
client sends - and waits after a create until every bootstrap address's Metadata shows a leader
for every partition, so a client's first request finds the topic ready.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafkapy.protocol import ApiKey, RequestHeader, decode_response, encode_request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    MetadataRequest,
    MetadataResponse,
)

__all__ = ["AdminError", "KafkaAdmin"]

CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 4
ALTER_CLIENT_QUOTAS_VERSION = 1
METADATA_VERSION = 9
DESCRIBE_CONFIGS_VERSION = 4
INCREMENTAL_ALTER_CONFIGS_VERSION = 1
BROKER_RESOURCE = 4
#: IncrementalAlterConfigs operations
SET, DELETE = 0, 1
TIMEOUT_S = 30.0


class AdminError(RuntimeError):
    """A request failed: a Kafka error code (`error_code`) or no broker answered."""

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code


class KafkaAdmin:
    """Topic administration against `bootstrap` (`host:port[,host:port...]`)."""

    def __init__(self, bootstrap: str, *, client_id: str = "kafkapy-testing", timeout_s: float = TIMEOUT_S) -> None:
        self.bootstrap = bootstrap
        self.addresses = [_split(a) for a in bootstrap.split(",") if a.strip()]
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._correlation = itertools.count(1)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        wait: bool = True,
    ) -> None:
        """Create `name` (replication_factor -1: the broker's default); AdminError on failure."""
        topic = CreateTopicsRequest.CreatableTopic(
            name=name,
            num_partitions=partitions,
            replication_factor=replication_factor,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        )
        request = CreateTopicsRequest(topics=[topic], timeout_ms=int(self.timeout_s * 1000))
        response = self._send(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, request)
        assert isinstance(response, CreateTopicsResponse)
        for result in response.topics:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"create {name}: {_describe(result.error_code, result.error_message)}", result.error_code)
        if wait:
            self.wait_for_topic(name, partitions)

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        """Delete `name`; AdminError on failure (UNKNOWN_TOPIC_OR_PARTITION if it is not there).
        `wait`: return once no bootstrap address lists it (the deletion is published)."""
        request = DeleteTopicsRequest(topic_names=[name], timeout_ms=int(self.timeout_s * 1000))
        response = self._send(ApiKey.DELETE_TOPICS, DELETE_TOPICS_VERSION, request)
        assert isinstance(response, DeleteTopicsResponse)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"delete {name}: {_describe(result.error_code, None)}", result.error_code)
        if wait:
            self._wait_everywhere(name, lambda response: not _listed(response, name), "is still listed by")

    def set_client_quotas(
        self, entity: Mapping[str, str | None], quotas: Mapping[str, float | None]
    ) -> None:
        """Set (a value) or remove (None) client quotas of one entity, e.g. `{"client-id": "x"}`
        or `{"user": None}` (the default user); AdminError when the broker refuses."""
        request = AlterClientQuotasRequest(entries=[AlterClientQuotasRequest.EntryData(
            entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
            ops=[AlterClientQuotasRequest.OpData(key=k, value=v or 0.0, remove=v is None) for k, v in quotas.items()],
        )])
        response = self._send(ApiKey.ALTER_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS_VERSION, request)
        assert isinstance(response, AlterClientQuotasResponse)
        for result in response.entries:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"quotas of {dict(entity)}: {_describe(result.error_code, result.error_message)}", result.error_code)

    def broker_configs_read_only(self, broker_id: int, names: list[str]) -> dict[str, bool]:
        """Config name -> read-only flag of DescribeConfigs on broker `broker_id`: False for the
        dynamic broker configs IncrementalAlterConfigs may change, True for static ones."""
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name=str(broker_id), configuration_keys=list(names)
        )
        response = self._send(ApiKey.DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, DescribeConfigsRequest(resources=[resource]))
        assert isinstance(response, DescribeConfigsResponse)
        found: dict[str, bool] = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"describe broker {broker_id}: {_describe(result.error_code, result.error_message)}", result.error_code)
            found.update({c.name: c.read_only for c in result.configs})
        return found

    def alter_broker_defaults(self, configs: Mapping[str, str | None]) -> None:
        """Set (a value) or delete (None) cluster-wide dynamic broker configs (the broker
        resource named "", as `kafka-configs --entity-type brokers --entity-default`)."""
        resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=BROKER_RESOURCE, resource_name="",
            configs=[IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
                     for k, v in configs.items()],
        )
        request = IncrementalAlterConfigsRequest(resources=[resource])
        response = self._send(ApiKey.INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_VERSION, request)
        assert isinstance(response, IncrementalAlterConfigsResponse)
        for result in response.responses:
            if result.error_code != ErrorCode.NONE:
                raise AdminError(f"broker defaults {dict(configs)}: {_describe(result.error_code, result.error_message)}", result.error_code)

    def list_topics(self) -> dict[str, int]:
        """Topic name -> partition count, from one broker's Metadata."""
        response = self._metadata(None, self.addresses)
        return {t.name: len(t.partitions) for t in response.topics if t.name is not None}

    def wait_for_topic(self, name: str, partitions: int) -> None:
        """Block until every bootstrap address lists `name` with a leader for each partition."""
        self._wait_everywhere(
            name, lambda response: _led(response, name, partitions), "has no leader for every partition on"
        )

    def _wait_everywhere(self, name: str, done: Callable[[MetadataResponse], bool], failure: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        pending = list(self.addresses)
        while pending:
            address = pending[0]
            try:
                if done(self._metadata([name], [address])):
                    pending.pop(0)
                    continue
            except (OSError, AdminError):
                pass
            if time.monotonic() > deadline:
                raise AdminError(f"topic {name} {failure} {address[0]}:{address[1]}")
            time.sleep(0.05)

    # -- transport ------------------------------------------------------------------------------
    def _metadata(self, topics: list[str] | None, addresses: list[tuple[str, int]]) -> MetadataResponse:
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        response = self._send(ApiKey.METADATA, METADATA_VERSION, request, addresses)
        assert isinstance(response, MetadataResponse)
        return response

    def _send(self, api_key: ApiKey, version: int, request: Any, addresses: list[tuple[str, int]] | None = None) -> Any:
        errors: list[str] = []
        for host, port in addresses or self.addresses:
            try:
                return self._exchange(host, port, api_key, version, request)
            except OSError as e:
                errors.append(f"{host}:{port}: {e}")
        raise AdminError(f"{api_key.name}: no broker answered ({'; '.join(errors)})")

    def _exchange(self, host: str, port: int, api_key: ApiKey, version: int, request: Any) -> Any:
        correlation_id = next(self._correlation)
        payload = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), request)
        with socket.create_connection((host, port), timeout=self.timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(payload)) + payload)
            head = _receive(sock, 4)
            body = _receive(sock, struct.unpack(">i", head)[0])
        got, response = decode_response(api_key, version, body)
        if got != correlation_id:
            raise AdminError(f"{api_key.name}: correlation id {got}, expected {correlation_id}")
        return response


def _receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return bytes(data)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.strip().rpartition(":")
    return host.strip("[]"), int(port)


def _led(response: MetadataResponse, name: str, partitions: int) -> bool:
    for topic in response.topics:
        if topic.name == name and topic.error_code == ErrorCode.NONE:
            leaders = [p.leader_id for p in topic.partitions if p.error_code == ErrorCode.NONE]
            return len(leaders) >= partitions and all(leader >= 0 for leader in leaders)
    return False


def _listed(response: MetadataResponse, name: str) -> bool:
    return any(t.name == name and t.error_code == ErrorCode.NONE for t in response.topics)


def _describe(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name} ({message})" if message else name
