"""Broker side of the controller: registration, heartbeats, controlled shutdown, and the
ControllerChannel that carries a broker's requests to the active controller.

Why (Kafka's BrokerLifecycleManager): a broker may lead or follow partitions only while the
controller considers it alive. It registers with a fresh incarnation id (answer: its broker
epoch, the offset of its registration record), then heartbeats every
`broker.heartbeat.interval.ms` with the metadata offset it has applied; the controller unfences
it once that offset reached its registration, i.e. once its image knows its own registration
and everything before it. A heartbeat answered STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED
(the controller no longer knows this incarnation) registers again.

Restart within the session timeout: the controller refuses a second incarnation of a broker id
while the first still has a live session (DUPLICATE_BROKER_REGISTRATION, as Kafka), since two
live processes must never share an id. A restarted broker proves the old process is gone: it
holds the flock on the data dir the old process held, and it reads the broker epoch the old
process stored there (`broker.epoch`, written at every accepted registration). It sends that as
`previous_broker_epoch`; the controller lets a registration naming the current epoch replace the
old incarnation at once (fencing it), instead of after its session lapses (up to
`broker.session.timeout.ms`, longer across a controller failover, which starts sessions afresh).

Leader lease (`kafkapy.leader.lease.enable`, default on; beyond Kafka): the controller fences
a broker whose last heartbeat reached it `broker.session.timeout.ms` ago and gives its
partitions new leaders. A broker that was paused or cut off cannot know that, and Kafka's would
keep accepting acks=1 writes until it learns - writes the new leader's log then truncates. Here a
broker holds a lease that runs `broker.session.timeout.ms` from the *send* time of its last
heartbeat the controller answered unfenced; the controller's session for that heartbeat runs
from its arrival, later, so the lease always ends first. Without a lease `holds_lease()` is
False and produce answers NOT_LEADER_OR_FOLLOWER. Cost: with no controller quorum answering for
a session timeout, acks=1 writes stop too (acks=all ones cannot complete then anyway with
`min.insync.replicas` > 1 and a majority of nodes gone).

Heartbeat failures are logged at INFO (the first of a series) and at WARNING once no heartbeat
was answered for half a session: the controller fences the broker at a whole one.

Controlled shutdown (SIGTERM): heartbeats with `want_shutdown` until the controller, having
moved every leadership away and seen this broker apply that, answers `should_shut_down`.
`ClusterNode.shutdown` bounds it (`kafkapy.shutdown.grace.ms`).

The active controller is the Raft leader: its controller listener is `controller.quorum.voters`
[leader id]. Every call retries NOT_CONTROLLER and network errors (a new leader is being
elected or activated) with a short backoff until its timeout, then raises
`ControllerUnavailableError`. A try still in flight when Raft names another leader is abandoned
and sent to the new one: an old controller that hangs instead of closing its connections (a
frozen process, a lost host) would otherwise hold it for the whole per-try timeout - up to the
client's own timeout for admin writes, so the client's CreateTopics failed although a new
controller had taken over seconds before.

In-process calls: when the Raft leader is this process (a combined broker + controller, a
single node above all), a call goes straight to the same controller handler the controller
listener would run (`handlers.registry.lookup(..., controller=True)`), with the request and
response objects as they are - no loopback socket, no encoding - under the same retry rules
(NOT_CONTROLLER, leadership moving away), so one mechanism serves one node and many.

Admin writes (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
AlterPartitionReassignments) wait for the controller's commit as long as the client's own
`timeout_ms` allows in one try: retrying an operation that was applied answers as if it had not
been (TOPIC_ALREADY_EXISTS, NO_REASSIGNMENT_IN_PROGRESS).

Resource handling: the channel and the heartbeats have peer pools of their own (not the node's
`controller_peers`, which Raft uses: a timed-out request closes its connection and fails the
others in flight on it); `BrokerLifecycle.run()` is one task and closes both when it ends.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar

import trio

from kafkapy.protocol import ApiKey, messages
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages.broker_registration import BrokerRegistrationRequest_Listener
from kafkapy.server.cluster.controller_driver import pop_metadata_offset
from kafkapy.server.cluster.liveness import SUSPECTS_TAG, encode_suspects
from kafkapy.server.cluster.peer import PeerError, PeerPool

if TYPE_CHECKING:
    from kafkapy.broker.config import ClusterConfig
    from kafkapy.protocol.messages import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        AlterPartitionRequest,
        AlterPartitionResponse,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        BrokerHeartbeatResponse,
        CreateAclsRequest,
        CreateAclsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from kafkapy.server.cluster.controller_driver import ControllerDriver
    from kafkapy.server.cluster.host import BrokerHost
    from kafkapy.server.cluster.metadata_publisher import MetadataPublisher
    from kafkapy.server.cluster.raft_driver import RaftDriver
    from kafkapy.server.security.inter_node import PeerSecurity

__all__ = [
    "BrokerLifecycle", "ChannelNode", "ControllerChannel", "ControllerUnavailableError",
    "LocalControllerCall",
]

R = TypeVar("R")

#: (api key, version, client id) -> the controller listener's handler of that API and version,
#: bound to a request context of this process's own (None: no controller handler serves it).
#: The Server gives it (it knows the handlers); the channel's in-process calls use it.
LocalControllerCall: TypeAlias = Callable[[ApiKey, int, str], Callable[[Any], Awaitable[Any]] | None]


class _AdminRequest(Protocol):
    """An admin write forwarded to the controller: bounded by its own `timeout_ms`."""

    @property
    def timeout_ms(self) -> int: ...


class ChannelNode(Protocol):
    """What the controller channel and the broker lifecycle use of their cluster node
    (kafkapy.server.cluster.node builds them with itself)."""

    @property
    def node_id(self) -> int: ...
    @property
    def config(self) -> ClusterConfig: ...
    @property
    def controller_security(self) -> PeerSecurity | None: ...
    @property
    def raft(self) -> RaftDriver: ...
    @property
    def publisher(self) -> MetadataPublisher: ...
    @property
    def controller(self) -> ControllerDriver | None: ...
    @property
    def lifecycle(self) -> BrokerLifecycle | None: ...

log = logging.getLogger(__name__)

_RETRY_S = 0.05
_RETRY_MAX_S = 0.25
#: how long an admin call waits for its result to reach the local image
_IMAGE_WAIT_S = 5.0
_SECURITY_PROTOCOLS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
#: the last broker epoch the controller gave a process of this data dir (see the module doc)
BROKER_EPOCH_FILE = "broker.epoch"


def read_broker_epoch(data_dir: Path) -> int:
    """The epoch stored by `write_broker_epoch`, or -1 (none, or unreadable)."""
    try:
        return int((data_dir / BROKER_EPOCH_FILE).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return -1


def write_broker_epoch(data_dir: Path, epoch: int) -> None:
    """Store `epoch` atomically (temp file, fsync, rename): a torn file would read as -1."""
    tmp = data_dir / (BROKER_EPOCH_FILE + ".tmp")
    with tmp.open("w", encoding="ascii") as f:
        f.write(f"{epoch}\n")
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(data_dir / BROKER_EPOCH_FILE)


class ControllerUnavailableError(PeerError):
    """No active controller answered within the call's timeout."""

    def __init__(self, message: str, error_code: ErrorCode = ErrorCode.NOT_CONTROLLER) -> None:
        super().__init__(message)
        self.error_code = error_code


def _answer_of(api_key: ApiKey, response: object, response_type: type[R]) -> R:
    """`response` as the `response_type` the caller asked for; PeerError if it is another."""
    if not isinstance(response, response_type):
        raise PeerError(f"{api_key.name}: the controller answered a {type(response).__name__}")
    return response


def _top_error(response: object) -> ErrorCode:
    """NOT_CONTROLLER when the answer says so at the top or in its first item."""
    code = getattr(response, "error_code", None)
    if code is not None:
        return ErrorCode(code)
    for attr in ("topics", "responses", "results", "entries", "filter_results"):
        items = getattr(response, attr, None)
        if items:
            return ErrorCode(items[0].error_code)
    return ErrorCode.NONE


class ControllerChannel:
    """Broker -> active controller requests (see the module docstring)."""

    def __init__(
        self, broker: BrokerHost, node: ChannelNode, local_call: LocalControllerCall | None = None
    ) -> None:
        self.broker = broker
        self.node = node
        self._local_call = local_call
        self.timeout_s = max(node.config.request_timeout_ms, 1000) / 1000 * 3
        # Connections of its own, not the node's `controller_peers`: a request that times out
        # closes its connection and fails the others in flight on it, and Raft's long-poll
        # Fetch (or a heartbeat) timing out must not fail an admin request the controller is
        # applying - the channel would retry it, and the retry of an applied operation answers
        # as if it had not been (TOPIC_ALREADY_EXISTS, NO_REASSIGNMENT_IN_PROGRESS).
        self.peers = PeerPool(
            lambda node_id: node.config.voters.get(node_id),
            client_id=f"kafkapy-channel-{node.config.node_id}",
            security=node.controller_security,
        )

    async def aclose(self) -> None:
        await self.peers.aclose()

    async def call(
        self,
        api_key: ApiKey,
        version: int,
        body: object,
        response_type: type[R],
        *,
        timeout_s: float | None = None,
        peers: PeerPool | None = None,
        per_try_s: float | None = None,
    ) -> R:
        """Send to the active controller, retrying NOT_CONTROLLER / network errors (on the
        channel's own connections unless `peers` is given). The answer is checked to be a
        `response_type` here, once for every caller (the codec decodes by API key, so it is
        generic): another type (a controller or codec bug) is a PeerError, which callers
        already take as "no controller answer", never a wrong object handed on."""
        pool = self.peers if peers is None else peers
        total = self.timeout_s if timeout_s is None else timeout_s
        deadline = trio.current_time() + total
        # A little longer than the controller's own wait for the commit, so its NOT_CONTROLLER
        # answer arrives instead of a timeout (which would close the shared connection).
        per_try = max(self.node.config.request_timeout_ms, 1000) / 1000 + 1.0
        if per_try_s is not None:
            per_try = max(per_try, per_try_s)
        pause = _RETRY_S
        last_error = "no controller leader known"
        while trio.current_time() < deadline:
            leader = self.node.raft.leader_id
            if leader is not None and leader in self.node.config.voters:
                try:
                    timeout = min(per_try, max(0.05, deadline - trio.current_time()))
                    if leader == self.node.node_id and self.node.controller is not None:
                        response = await self._call_local(api_key, version, body, timeout)
                    else:
                        response = await self._request_while_leader(
                            pool, leader, api_key, version, body, timeout
                        )
                except PeerError as exc:
                    last_error = f"controller {leader}: {exc}"
                else:
                    if _top_error(response) != ErrorCode.NOT_CONTROLLER:
                        return _answer_of(api_key, response, response_type)
                    last_error = f"node {leader} is not the active controller yet"
            await self._wait_for_news(pause)
            pause = min(_RETRY_MAX_S, pause * 2)
        raise ControllerUnavailableError(f"{api_key.name}: {last_error}")

    async def _wait_for_news(self, pause_s: float) -> None:
        """Before a retry: wait `pause_s`, or less if Raft's leader changes or a metadata
        entry is applied (a new controller activates once it applied its epoch's first entry),
        so a node whose own controller is starting does not sleep through its activation."""
        changed = self.node.raft.leader_changed  # replaced by a fresh event after each change
        publisher = self.node.publisher
        with trio.move_on_after(pause_s):
            async with trio.open_nursery() as nursery:

                async def leader() -> None:
                    await changed.wait()
                    nursery.cancel_scope.cancel()

                async def applied() -> None:
                    await publisher.wait_applied(publisher.applied_offset + 1, pause_s)
                    nursery.cancel_scope.cancel()

                nursery.start_soon(leader)
                nursery.start_soon(applied)
                await trio.sleep(pause_s)

    async def _call_local(self, api_key: ApiKey, version: int, body: Any, timeout_s: float) -> Any:
        """Run the controller handler of `api_key` in this process (see the module docstring);
        PeerError where the wire path would have one (a timeout, a handler that raised)."""
        client_id = f"kafkapy-channel-{self.node.node_id}"
        call = self._local_call(api_key, version, client_id) if self._local_call else None
        if call is None:
            raise PeerError(f"no controller handler for {api_key.name} v{version}")
        with trio.move_on_after(timeout_s):
            try:
                return await call(body)
            except Exception as exc:  # the wire path closes the connection: retried the same way
                log.exception("in-process %s to the controller failed", api_key.name)
                raise PeerError(f"{api_key.name} failed in the controller: {exc!r}") from exc
        raise PeerError(f"{api_key.name}: no answer within {timeout_s:.1f} s")

    async def _request_while_leader(
        self,
        pool: PeerPool,
        leader: int,
        api_key: ApiKey,
        version: int,
        body: Any,
        timeout_s: float,
    ) -> Any:
        """`pool.request` to `leader`, abandoned with PeerError once Raft names another leader
        (see the module docstring)."""
        raft = self.node.raft
        answers: list[Any] = []
        errors: list[PeerError] = []

        async def watch_leader() -> None:
            while raft.leader_id == leader:
                await raft.leader_changed.wait()  # replaced by a fresh event after each change
            nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch_leader)
            try:
                answers.append(
                    await pool.request(leader, api_key, version, body, timeout_s=timeout_s)
                )
            except PeerError as exc:  # raised outside the nursery: no exception group
                errors.append(exc)
            finally:
                nursery.cancel_scope.cancel()
        if answers:
            return answers[0]
        if errors:
            raise errors[0]
        raise PeerError(f"node {leader} is no longer the Raft leader (now {raft.leader_id})")

    async def _after_write(self, response: R) -> R:
        """Strip the controller's metadata offset and wait until the local image has it."""
        offset = pop_metadata_offset(response)
        if offset >= 0 and not await self.node.publisher.wait_applied(offset, _IMAGE_WAIT_S):
            log.warning(
                "metadata offset %d not applied locally within %.0f s", offset, _IMAGE_WAIT_S
            )
        return response

    def _admin_timeout_s(self, request_timeout_ms: int) -> float:
        """The client's request timeout (bounded to [channel timeout, 60 s])."""
        return max(self.timeout_s, min(request_timeout_ms, 60_000) / 1000)

    async def _admin_call(
        self, api_key: ApiKey, version: int, request: _AdminRequest, response_type: type[R]
    ) -> R:
        """An admin write: one try may take as long as the controller's commit wait for it
        (the client's `timeout_ms`, see `handlers/shared/controller.py`), so a slow commit is waited
        for rather than retried - a retry of an applied operation answers as if it had not
        been (TOPIC_ALREADY_EXISTS, NO_REASSIGNMENT_IN_PROGRESS)."""
        commit_wait_s = min(max(request.timeout_ms, 0), 60_000) / 1000
        response = await self.call(
            api_key,
            version,
            request,
            response_type,
            timeout_s=self._admin_timeout_s(request.timeout_ms) + 1.0,
            per_try_s=commit_wait_s + 1.0,
        )
        return await self._after_write(response)

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        return await self._admin_call(ApiKey.CREATE_TOPICS, 7, request, messages.CreateTopicsResponse)

    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        return await self._admin_call(ApiKey.DELETE_TOPICS, 6, request, messages.DeleteTopicsResponse)

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return await self._admin_call(ApiKey.CREATE_PARTITIONS, 3, request, messages.CreatePartitionsResponse)

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        """AlterPartitionReassignments v0 (bounded by the request's own timeout)."""
        return await self._admin_call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, request, messages.AlterPartitionReassignmentsResponse
        )

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        """ElectLeaders v2 (the request's own timeout bounds the wait for a controller)."""
        return await self._admin_call(ApiKey.ELECT_LEADERS, 2, request, messages.ElectLeadersResponse)

    async def alter_client_quotas(self, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
        """AlterClientQuotas v1, answered once the local image has the change."""
        response = await self.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request, messages.AlterClientQuotasResponse)
        return await self._after_write(response)

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        response = await self.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request, messages.IncrementalAlterConfigsResponse
        )
        return await self._after_write(response)

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse:
        """AlterUserScramCredentials v0; answered once the local image has the change, so the
        next login on this node already checks the new credential."""
        response = await self.call(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request, messages.AlterUserScramCredentialsResponse
        )
        return await self._after_write(response)

    async def create_acls(self, request: CreateAclsRequest) -> CreateAclsResponse:
        """CreateAcls v3 (a retry of an applied one finds its bindings and writes nothing)."""
        response = await self.call(ApiKey.CREATE_ACLS, 3, request, messages.CreateAclsResponse)
        return await self._after_write(response)

    async def delete_acls(self, request: DeleteAclsRequest) -> DeleteAclsResponse:
        """DeleteAcls v3."""
        response = await self.call(ApiKey.DELETE_ACLS, 3, request, messages.DeleteAclsResponse)
        return await self._after_write(response)

    def _broker_epoch(self) -> int:
        lifecycle = self.node.lifecycle
        return lifecycle.broker_epoch if lifecycle is not None else -1

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """AlterPartition v3; `broker_id` / `broker_epoch` filled in when left at 0 / -1."""
        if request.broker_id == 0:
            request.broker_id = self.node.node_id
        if request.broker_epoch == -1:
            request.broker_epoch = self._broker_epoch()
        response = await self.call(ApiKey.ALTER_PARTITION, 3, request, messages.AlterPartitionResponse)
        pop_metadata_offset(response)
        return response

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """A block of producer ids: (first id, count). Raises when none can be had."""
        request = messages.AllocateProducerIdsRequest(
            broker_id=self.node.node_id, broker_epoch=self._broker_epoch()
        )
        response = await self.call(
            ApiKey.ALLOCATE_PRODUCER_IDS, 0, request, messages.AllocateProducerIdsResponse
        )
        pop_metadata_offset(response)
        if response.error_code != ErrorCode.NONE:
            raise ControllerUnavailableError(
                f"AllocateProducerIds: {ErrorCode(response.error_code).name}",
                ErrorCode(response.error_code),
            )
        return response.producer_id_start, response.producer_id_len


class BrokerLifecycle:
    """Registration and heartbeats of this broker (see the module docstring)."""

    def __init__(self, broker: BrokerHost, node: ChannelNode, channel: ControllerChannel) -> None:
        self.broker = broker
        self.node = node
        self.channel = channel
        self.incarnation_id = uuid.uuid4()
        #: -1 until the controller accepted a registration of this incarnation
        self.broker_epoch = -1
        self.fenced = True
        self.want_shutdown = False
        self.shut_down_ok = trio.Event()
        self.heartbeat_interval_s = max(node.config.heartbeat_interval_ms, 10) / 1000
        #: registration and (un)fencing: news in a cluster, routine at a quorum of one's start
        self._level = logging.DEBUG if node.config.quorum_of_one else logging.INFO
        self._wake = trio.Event()
        self._last_refusal = ErrorCode.NONE
        self.session_timeout_s = max(node.config.session_timeout_ms, 1) / 1000
        self.lease_enabled = broker.config.get_bool("kafkapy.leader.lease.enable")
        #: send time (trio clock) of the last heartbeat answered unfenced (-inf: none yet)
        self.lease_from = float("-inf")
        #: send time of the last heartbeat any active controller answered
        self._answered_at = trio.current_time()
        self._failures = 0
        self._warned = False
        #: nodes whose connections failed here (refused/reset/closed) -> when; sent to the
        #: controller with the next heartbeat (liveness.py)
        self._suspects: dict[int, float] = {}
        #: the epoch to send as `previous_broker_epoch` (read from the data dir at first use)
        self._previous_epoch: int | None = None
        # Heartbeats go on a connection of their own: their short timeout (two intervals) closes
        # the connection it hits, which would fail the channel's admin and AlterPartition
        # requests in flight on a shared one (see `ControllerChannel.peers`).
        self._heartbeat_peers = PeerPool(
            lambda node_id: node.config.voters.get(node_id),
            client_id=f"kafkapy-heartbeat-{node.config.node_id}",
            security=node.controller_security,
            on_gone=self.report_gone,
        )

    def _applied_offset(self) -> int:
        return self.node.publisher.applied_offset

    def _listeners(self) -> list[BrokerRegistrationRequest_Listener]:
        config = self.broker.config
        names = {listener.name: listener for listener in config.listeners}
        out = []
        for name, (host, port) in self.broker.endpoints.items():
            if name in config.controller_listener_names or name not in names:
                continue
            proto = _SECURITY_PROTOCOLS.get(names[name].security_protocol.upper(), 0)
            out.append(
                BrokerRegistrationRequest_Listener(
                    name=name, host=host, port=port, security_protocol=proto
                )
            )
        return out

    def _epoch_dir(self) -> Path | None:
        dirs = self.broker.data_dirs
        return dirs[0] if dirs else None

    async def register(self) -> bool:
        """One registration attempt; True when accepted."""
        epoch_dir = self._epoch_dir()
        if self._previous_epoch is None:
            self._previous_epoch = -1 if epoch_dir is None else read_broker_epoch(epoch_dir)
        request = messages.BrokerRegistrationRequest(
            broker_id=self.node.node_id,
            cluster_id=self.broker.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=self._listeners(),
            rack=self.broker.config.get("broker.rack") or None,
            previous_broker_epoch=self._previous_epoch,
        )
        try:
            response = await self.channel.call(
                ApiKey.BROKER_REGISTRATION, 3, request, messages.BrokerRegistrationResponse
            )
        except PeerError as exc:
            log.info("broker %d: registration not possible yet: %s", self.node.node_id, exc)
            return False
        offset = pop_metadata_offset(response)
        code = ErrorCode(response.error_code)
        if code != ErrorCode.NONE:
            if code != self._last_refusal:  # once per reason: a duplicate lasts a session
                log.warning("broker %d: registration refused: %s", self.node.node_id, code.name)
            self._last_refusal = code
            return False
        self.broker_epoch = response.broker_epoch
        self._last_refusal = ErrorCode.NONE
        self.fenced = True
        self._previous_epoch = self.broker_epoch
        if epoch_dir is not None:
            try:
                await trio.to_thread.run_sync(write_broker_epoch, epoch_dir, self.broker_epoch)
            except OSError as exc:  # only costs a faster takeover after a crash
                log.warning("broker %d: could not store its epoch: %s", self.node.node_id, exc)
        log.log(self._level, "broker %d registered with epoch %d", self.node.node_id, self.broker_epoch)
        # The controller unfences a broker whose heartbeat shows its registration applied:
        # waiting for that here lets the first heartbeat unfence it.
        publisher = self.node.publisher
        if offset >= 0 and publisher is not None:
            await publisher.wait_applied(offset, self.heartbeat_interval_s)
        return True

    def report_gone(self, node_id: int) -> None:
        """A connection to `node_id` was refused, reset or closed: tell the controller in a
        heartbeat sent now (it probes the node and fences it if its process is gone)."""
        if node_id == self.node.node_id:
            return
        fresh = node_id not in self._suspects
        self._suspects[node_id] = trio.current_time()
        if fresh:
            self.wake()

    def _suspects_to_send(self) -> list[int]:
        horizon = trio.current_time() - self.session_timeout_s
        for node_id in [n for n, at in self._suspects.items() if at < horizon]:
            del self._suspects[node_id]
        return sorted(self._suspects)

    def holds_lease(self) -> bool:
        """May this broker accept writes as a leader (see the module docstring)?"""
        if not self.lease_enabled:
            return True
        return trio.current_time() - self.lease_from < self.session_timeout_s

    def _heartbeat_failed(self, reason: str) -> None:
        """Log a failed heartbeat: INFO for the first of a series, WARNING past half a session."""
        self._failures += 1
        silent_s = trio.current_time() - self._answered_at
        if not self._warned and silent_s >= self.session_timeout_s / 2:
            self._warned = True
            log.warning(
                "broker %d: no heartbeat answered for %.1f s (%d failures; the controller fences "
                "at %.1f s): %s",
                self.node.node_id,
                silent_s,
                self._failures,
                self.session_timeout_s,
                reason,
            )
        elif self._failures == 1:
            log.info("broker %d heartbeat failed: %s", self.node.node_id, reason)

    def _heartbeat_answered(self, sent_at: float) -> None:
        if self._failures:
            log.info(
                "broker %d heartbeat answered again after %d failures (%.1f s)",
                self.node.node_id,
                self._failures,
                trio.current_time() - self._answered_at,
            )
        self._failures = 0
        self._warned = False
        self._answered_at = sent_at

    async def heartbeat(self) -> BrokerHeartbeatResponse | None:
        """One heartbeat (None when no controller answered)."""
        sent_at = trio.current_time()
        request = messages.BrokerHeartbeatRequest(
            broker_id=self.node.node_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=self._applied_offset(),
            want_fence=False,
            want_shut_down=self.want_shutdown,
        )
        suspects = self._suspects_to_send()
        if suspects:
            request.unknown_tagged_fields[SUSPECTS_TAG] = encode_suspects(suspects)
        try:
            response = await self.channel.call(
                ApiKey.BROKER_HEARTBEAT,
                1,
                request,
                messages.BrokerHeartbeatResponse,
                timeout_s=self.heartbeat_interval_s * 2,
                peers=self._heartbeat_peers,
            )
        except PeerError as exc:
            self._heartbeat_failed(str(exc))
            return None
        pop_metadata_offset(response)
        code = ErrorCode(response.error_code)
        self._heartbeat_answered(sent_at)
        for node_id in suspects:
            if self._suspects.get(node_id, sent_at + 1) <= sent_at:
                del self._suspects[node_id]  # delivered (a later report stays queued)
        if code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.warning(
                "broker %d: controller answered %s, registering again", self.node.node_id, code.name
            )
            self.broker_epoch = -1
            return response
        if code != ErrorCode.NONE:
            log.warning("broker %d heartbeat: %s", self.node.node_id, code.name)
            return response
        if self.fenced != response.is_fenced:
            log.log(
                self._level,
                "broker %d is %s", self.node.node_id, "fenced" if response.is_fenced else "unfenced"
            )
        self.fenced = response.is_fenced
        if not response.is_fenced:
            self.lease_from = sent_at
        if response.should_shut_down:
            self.shut_down_ok.set()
        return response

    async def run(self) -> None:
        """Register, then heartbeat until cancelled (faster while fenced, to join quickly)."""
        try:
            await self._run()
        finally:
            with trio.CancelScope(shield=True):
                await self._heartbeat_peers.aclose()
                await self.channel.aclose()

    async def _run(self) -> None:
        while True:
            if self.broker_epoch < 0 and not await self.register():
                await trio.sleep(min(self.heartbeat_interval_s, 0.2))
                continue
            await self.heartbeat()
            await self._until_next_heartbeat()
            self._wake = trio.Event()

    async def _until_next_heartbeat(self) -> None:
        """The heartbeat interval, or a `wake()`; while fenced or shutting down at most 50 ms,
        and less if a metadata entry is applied meanwhile: what the controller waits for (this
        broker catching up with the metadata log) shows as a publish."""
        interval = self.heartbeat_interval_s
        hurry = self.fenced or self.want_shutdown
        if hurry:
            interval = min(interval, 0.05)
        publisher = self.node.publisher
        with trio.move_on_after(interval):
            async with trio.open_nursery() as nursery:
                if hurry and publisher is not None:

                    async def applied() -> None:
                        await publisher.wait_applied(publisher.applied_offset + 1, interval)
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(applied)
                await self._wake.wait()
                nursery.cancel_scope.cancel()

    def wake(self) -> None:
        """Send the next heartbeat now instead of after the interval."""
        self._wake.set()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away; returns once it says we may stop.
        Skipped when no other broker is unfenced: nobody could take a leadership over, and a
        single node would only answer the requests still in flight NOT_LEADER_OR_FOLLOWER."""
        if self.broker_epoch < 0:
            return
        brokers = self.node.publisher.image.brokers
        if not any(b.id != self.node.node_id and not b.fenced for b in brokers.values()):
            return
        self.want_shutdown = True
        self.wake()
        await self.shut_down_ok.wait()
        log.info("broker %d: controlled shutdown complete", self.node.node_id)
