"""One client connection: frames in, handlers run, responses out strictly in request order.

Flow: the reader takes frames from the stream (`frames.py`, which rejects an oversized size prefix
before any body is buffered), decodes each request and starts it as its own task, then queues a slot for it
in a bounded channel - that bound is the per-connection in-flight limit, and a full channel stops
the reader (backpressure). The writer takes slots in order and waits for each to be filled, so
responses leave in request order while a slow request (a long-poll fetch that released its turn)
does not hold up the *processing* of later ones.

Error handling: an undecodable frame, an unknown API key or an unsupported version (other than
ApiVersions, which gets UNSUPPORTED_VERSION plus our version list so clients downgrade) is logged
and closes the connection after the responses queued before it - Kafka's behaviour. A handler
exception is logged with its traceback and answered with UNKNOWN_SERVER_ERROR where the API has a
place for it. Socket errors are logged at debug level; nothing here can take the broker down.
A test's `FaultInjector` (`Broker.fault_injector`, None in production; kafkapy.broker.faults) is
consulted once a request's turn comes, before its handler: it may fail, drop or delay it.

Listener kinds: a connection that came in on a controller listener (`controller.listener.names`,
bound in cluster mode only) is served from the controller registry (`@controller_handler`), every
other one from the broker registry (`@handler`) - see kafkapy.broker.handlers.registry.

Resource handling: `handle_connection` owns the stream and closes it on every exit path. Idle
connections (no bytes and no request in flight for `connections.max.idle.ms`) are closed.

Frames: read by `frames.frame_source` (memory that follows what the peer sent, see `frames.py`);
on other streams (TLS, tests' memory streams) responses' file regions are copied into the stream
(sendfile cannot encrypt). Each frame read holds its bytes in the broker-wide request memory
(`queued.max.request.bytes`, `frames.RequestMemory`) until its handler has answered - or until
it is refused or dropped unread - so at the bound every connection stops reading.

Client quotas (KIP-219, `kafkapy.quota`): a handler whose client went over a byte-rate quota
leaves the throttle time in `ctx.throttle_ms`; `request_percentage` is metered here from the
handler's own time (until it first released its turn: waiting in a long poll is not work). The
response goes out at once with `throttle_time_ms` set, and the reader takes no further frame of
this connection until the throttle time has passed (muted, as Kafka mutes the channel); for a
request version older than client-side throttling the response itself waits that long. Follower
fetches, WriteTxnMarkers and the controller listener are never metered.

Secured listeners (`kafkapy.server.security`): a TLS connection does its handshake and a SASL
listener's connection authenticates in a phase of its own before the reader and writer start
(`server.authenticator`), so the request path itself has no security check at all.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkapy.authorizer import AclOperation
from kafkapy.broker.clock import quota_ms
from kafkapy.broker.context import CloseConnection, ConnectionState, RequestContext
from kafkapy.broker.faults import InjectedFailure
from kafkapy.broker.handlers.api_versions import unsupported_version_response
from kafkapy.broker.handlers.registry import HandlerSpec, controller_api_versions_body, lookup
from kafkapy.protocol import ApiKey, RequestHeader, decode_request, encode_response
from kafkapy.protocol.error_versions import downgrade_errors
from kafkapy.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kafkapy.protocol.framing import FrameSizeError
from kafkapy.protocol.raw_response import RawResponse, Segment
from kafkapy.quota.client_quotas import REQUEST_PERCENTAGE, client_throttles
from kafkapy.server.authenticator import authenticate
from kafkapy.server.broker import Broker
from kafkapy.server.frames import (
    FrameSource,
    RequestMemory,
    frame_source,
    request_header_prefix,
    size_prefixed,
)
from kafkapy.server.security.listener import ListenerSecurity
from kafkapy.server.zerocopy import close_fds, send_segments

__all__ = ["Connection"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
#: most answers one send carries (bounds the segments joined or handed to writev)
_WRITE_BATCH = 64


@dataclass(slots=True)
class _Slot:
    """One request's place in the response order; `done` once its answer (or None) is set -
    a plain flag: the writer parks on the connection's one `_answered` lot while it waits."""

    done: bool = False
    segments: list[Segment] | None = None  # None: nothing to send (acks=0)
    fds: list[int] = field(default_factory=list)  # owned by the slot (see zerocopy)
    close: bool = False




@dataclass(slots=True)
class _Job:
    """A request decoded and queued for the writer, waiting to be run (`_run_jobs`)."""

    spec: HandlerSpec
    ctx: RequestContext
    request: Any
    slot: _Slot
    received: float
    size: int


class _Refused(Exception):
    """A request refused before its handler ran, answered with its API's error response."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


class Connection:
    def __init__(
        self,
        broker: Broker,
        stream: trio.abc.Stream,
        listener_name: str,
        peer: str,
        *,
        security: ListenerSecurity | None = None,
        memory: RequestMemory | None = None,
    ) -> None:
        self.broker = broker
        #: what this connection's handlers use of the broker (one bundle per broker)
        self.ports = broker.ports
        self.stream = stream
        self.security = security
        self.state = ConnectionState(listener_name, peer)
        config = broker.config
        self.controller_listener = listener_name in config.controller_listener_names
        self.max_request_bytes = config.get_int("socket.request.max.bytes")
        #: `queued.max.request.bytes`, shared by the listeners' connections (`ServerApp`)
        self.memory = memory or RequestMemory(config.get_int("queued.max.request.bytes"))
        self.idle_s = config.get_int("connections.max.idle.ms") / 1000
        self.max_inflight = max(1, config.get_int("kafkapy.max.inflight.requests.per.connection"))
        #: quotas apply to client listeners only
        self.metered = not self.controller_listener
        self.inflight = 0
        self._seq = 0
        self._owned_fds: set[int] = set()
        self.reader_scope = trio.CancelScope()
        #: KIP-219: no frame is taken from the client before this `trio.current_time()`
        self.muted_until = 0.0
        self._auth_scope = trio.CancelScope()  # a cancelled scope cannot be re-entered
        #: where the writer waits for the answer it sends next (`_Slot.done`)
        self._answered = trio.lowlevel.ParkingLot()

    async def run(self) -> None:
        """Serve until the peer closes, an error closes us, or the broker stops reading.

        A TLS stream does its handshake first and a SASL listener's connection authenticates
        (`server.authenticator`) before the reader and writer start; a connection that fails
        either is closed without serving anything."""
        source: FrameSource | None = None
        try:
            early: list[bytes | bytearray] = []
            security = self.security
            if security is not None and (security.ssl_context is not None or security.sasl):
                # frames before authentication are capped, and not counted in the request memory
                source = frame_source(self.stream, self.max_request_bytes)
                with self._auth_scope:
                    authenticated = await authenticate(self, security, source)
                if authenticated is None or self._auth_scope.cancel_called:
                    return
                source.use_memory(self.memory)
                early = authenticated
                for frame in early:
                    self.memory.force(len(frame))
            else:
                source = frame_source(self.stream, self.max_request_bytes, self.memory)
            async with trio.open_nursery() as nursery:
                send, receive = trio.open_memory_channel[_Slot](self.max_inflight)
                nursery.start_soon(self._writer, receive, nursery.cancel_scope)
                async with send:
                    with self.reader_scope:
                        await self._reader(send, nursery, source, early)
        except* (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as group:
            log.debug("connection %s closed: %r", self.state.peer, group.exceptions)
        finally:
            if source is not None:
                source.close()
            close_fds(list(self._owned_fds))  # responses never sent
            self._owned_fds.clear()
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.aclose_forcefully(self.stream)

    def _release(self, slot: _Slot) -> None:
        if slot.fds:
            close_fds(slot.fds)
            self._owned_fds.difference_update(slot.fds)
            slot.fds = []

    def stop_reading(self) -> None:
        """Graceful shutdown: take no new requests; queued ones still get their responses."""
        self.reader_scope.cancel()
        self._auth_scope.cancel()

    # -- reading ----------------------------------------------------------------------------------
    async def _reader(
        self,
        send: trio.MemorySendChannel[_Slot],
        nursery: trio.Nursery,
        source: FrameSource,
        early: list[bytes | bytearray],
    ) -> None:
        """`early`: frames that arrived with the last SASL message (already read, not served)."""
        if not await self._dispatch_all(early, send, nursery):
            return
        last_activity = trio.current_time()
        while True:
            received = False
            bad: ProtocolError | None = None
            frames: list[bytes | bytearray] = []
            with trio.move_on_at(last_activity + self.idle_s):
                try:
                    frames = await source.receive()
                    if not frames:
                        log.debug("connection %s: peer closed", self.state.peer)
                        return
                    received = True
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    log.debug("connection %s: read failed: %r", self.state.peer, e.__cause__ or e)
                    return
                except ProtocolError as e:
                    bad = e
            if bad is not None:
                self._log_bad_frame(bad)
                closing = _Slot(done=True, close=True)
                await send.send(closing)
                return
            if not received:
                if self.inflight == 0:
                    log.info("closing connection %s idle for %.0f s", self.state.peer, self.idle_s)
                    return
                last_activity = trio.current_time()
                continue
            if not await self._dispatch_all(frames, send, nursery):
                return
            last_activity = trio.current_time()

    async def _dispatch_all(
        self,
        frames: list[bytes | bytearray],
        send: trio.MemorySendChannel[_Slot],
        nursery: trio.Nursery,
    ) -> bool:
        """Dispatch in order, holding them while a quota mutes the connection; False when the
        connection must close. Frames never dispatched give their request memory back."""
        taken = 0
        jobs: deque[_Job] = deque()
        try:
            for frame in frames:
                if self.muted_until and self.muted_until > trio.current_time():
                    self._start(jobs, nursery)
                    await trio.sleep_until(self.muted_until)
                taken += 1
                if not await self._dispatch(frame, send, nursery, jobs):
                    return False
            return True
        finally:
            self._start(jobs, nursery)
            for frame in frames[taken:]:
                self.memory.release(len(frame))

    def _start(self, jobs: deque[_Job], nursery: trio.Nursery) -> None:
        """Start the requests dispatched so far, in one task (see `_run_jobs`)."""
        if jobs:
            nursery.start_soon(self._run_jobs, jobs.copy(), nursery)
            jobs.clear()

    async def _run_jobs(self, jobs: deque[_Job], nursery: trio.Nursery) -> None:
        """Run requests read together one after another in this task, each in its turn: no task
        and no scheduler pass per request. A handler that releases its turn to wait (a long
        poll, acks=all) hands the requests behind it to a new task, so they are not held up."""
        handed = False

        def hand_off() -> None:
            nonlocal handed
            if jobs and not handed:
                handed = True
                nursery.start_soon(self._run_jobs, jobs, nursery)

        try:
            while jobs and not handed:
                job = jobs.popleft()
                job.ctx.on_release = hand_off
                await self._run_request(job.spec, job.ctx, job.request, job.slot, job.received, job.size)
        finally:
            while jobs and not handed:  # cancelled: the requests never run give back their memory
                job = jobs.popleft()
                self.inflight -= 1
                self.memory.release(job.size)

    def _log_bad_frame(self, bad: ProtocolError) -> None:
        """One warning naming a non-Kafka client as such (an HTTP request, a TLS hello on a
        plaintext listener), counted per listener for the metrics."""
        state = self.state
        foreign = bad.foreign if isinstance(bad, FrameSizeError) else None
        if foreign is not None:
            self.broker.stats.non_kafka_connections[(state.listener_name, foreign)] += 1
            log.warning(
                "closing connection %s on listener %s: a non-Kafka client (%s): %s",
                state.peer,
                state.listener_name,
                foreign,
                bad.reason,
            )
        else:
            log.warning("closing connection %s: bad frame: %s", state.peer, bad.reason)

    async def _dispatch(
        self,
        frame: bytes | bytearray,
        send: trio.MemorySendChannel[_Slot],
        nursery: trio.Nursery,
        jobs: deque[_Job],
    ) -> bool:
        """Decode one frame and add its request to `jobs` (started by the caller); False when
        the connection must close. The frame's request memory is released here unless it became
        a job (whose run releases it). Before anything that may wait, `jobs` are started: the
        writer may be waiting for their answers."""
        slot = _Slot()
        started = False
        try:
            try:
                header, request = decode_request(frame)
            except UnsupportedVersionError as e:
                self._start(jobs, nursery)
                return await self._reject(send, slot, request_header_prefix(frame), e.reason)
            except ProtocolError as e:
                log.debug("undecodable frame from %s: %s", self.state.peer, frame[:256].hex())
                self._start(jobs, nursery)
                return await self._reject(send, slot, None, f"malformed request: {e.reason}")
            spec = lookup(header.api_key, controller=self.controller_listener)
            if spec is None or not spec.supports(header.api_version):
                reason = f"no handler for api key {header.api_key} v{header.api_version}"
                self._start(jobs, nursery)
                return await self._reject(send, slot, header, reason)
            seq = self._seq
            self._seq += 1
            self.inflight += 1
            received = time.perf_counter()
            try:
                send.send_nowait(slot)
            except trio.WouldBlock:  # max_inflight answers pending: wait for the writer
                self._start(jobs, nursery)
                await send.send(slot)
            ctx = RequestContext(self.ports, header, self.state, seq)
            jobs.append(_Job(spec, ctx, request, slot, received, len(frame)))
            started = True
            return True
        finally:
            if not started:
                self.memory.release(len(frame))

    async def _reject(
        self,
        send: trio.MemorySendChannel[_Slot],
        slot: _Slot,
        header: RequestHeader | None,
        reason: str,
    ) -> bool:
        """An API or version we do not serve: ApiVersions gets its v0 error answer, the rest a
        logged close (after the responses already queued). False when the connection closes."""
        if header is not None and header.api_key == ApiKey.API_VERSIONS:
            if self.controller_listener:
                body = controller_api_versions_body(ErrorCode.UNSUPPORTED_VERSION)
                answer = encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
            else:
                answer = unsupported_version_response(header)
            slot.segments = [size_prefixed(answer)]
            slot.done = True
            await send.send(slot)
            return True
        log.warning("closing connection %s: %s", self.state.peer, reason)
        slot.close = True
        slot.done = True
        await send.send(slot)
        return False

    # -- handling ---------------------------------------------------------------------------------
    async def _run_request(
        self,
        spec: HandlerSpec,
        ctx: RequestContext,
        request: Any,
        slot: _Slot,
        received: float,
        size: int,
    ) -> None:
        """Run the handler in this connection's turn; `received`: when the frame was decoded
        (the wait for the turn is the request's queue time in the metrics); `size`: the frame's
        bytes in the request memory, released once answered."""
        header = ctx.header
        response: Any = None
        started = received
        try:
            await self.state.sequencer.wait_turn(ctx.seq)
            if self.muted_until and self.muted_until > trio.current_time():
                # already read when the connection was muted: held like the frames not yet read
                await trio.sleep_until(self.muted_until)
            started = time.perf_counter()
            try:
                if self.controller_listener:
                    self._authorize_controller_request(ctx)
                if self.broker.fault_injector is not None:
                    await self._inject_fault(header)
                response = await spec.func(ctx, request)
                if self.metered and (ctx.throttle_ms or self.broker.quotas.active):
                    await self._throttle(ctx, request, response, started)
            finally:
                ctx.on_release = None  # its work is done: the requests behind it stay in this task
                ctx.release_turn()
            if isinstance(response, RawResponse):
                slot.fds = response.fds()
                self._owned_fds.update(slot.fds)
            slot.segments = self._encode(header, response)
        except CloseConnection as e:
            log.info("closing connection %s after %s: %s", self.state.peer, spec.api_key.name, e)
            slot.close = True
            response = None
        except (InjectedFailure, _Refused) as e:
            response = e.error_code
            slot.segments, slot.close = self._error_segments(spec, header, request, e.error_code)
        except Exception:
            response = int(ErrorCode.UNKNOWN_SERVER_ERROR)
            log.exception(
                "%s v%d handler failed (correlation id %d, client %s)",
                spec.api_key.name,
                header.api_version,
                header.correlation_id,
                header.client_id,
            )
            slot.segments, slot.close = self._error_segments(spec, header, request)
        finally:
            self.inflight -= 1
            self.memory.release(size)
            slot.done = True
            if self._answered:
                self._answered.unpark_all()
            self._observe(header, request, response, received, started)

    async def _throttle(self, ctx: RequestContext, request: Any, response: Any, started: float) -> None:
        """Meter `request_percentage`, then mute the connection for the request's throttle time
        (and, for a version whose clients do not throttle themselves, hold the response)."""
        quotas = self.broker.quotas
        header = ctx.header
        throttle = ctx.throttle_ms
        if quotas.enabled(REQUEST_PERCENTAGE) and not _exempt(header.api_key, request):
            busy_ms = ((ctx.released_at or time.perf_counter()) - started) * 1000
            # percent of one thread: 1 ms of handler time is 0.1 percent-second
            used = quotas.record(REQUEST_PERCENTAGE, ctx.user, header.client_id or "", busy_ms / 10, quota_ms())
            if used > throttle:
                throttle = used
                if hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = max(response.throttle_time_ms, used)
        if throttle <= 0:
            return
        self.muted_until = max(self.muted_until, trio.current_time() + throttle / 1000)
        if not client_throttles(header.api_key, header.api_version):
            ctx.release_turn()
            await trio.sleep(throttle / 1000)

    def _observe(
        self, header: RequestHeader, request: Any, response: Any, received: float, started: float
    ) -> None:
        """Request metrics and the request log line (`BrokerStats.request_done`)."""
        done = time.perf_counter()
        state = self.state
        self.broker.stats.request_done(
            header,
            request,
            response,
            (started - received) * 1000,
            (done - received) * 1000,
            principal=state.principal,
            peer=state.peer,
            listener=state.listener_name,
        )

    async def _inject_fault(self, header: RequestHeader) -> None:
        """Apply the test fault injector's rule for this request (kafkapy.broker.faults)."""
        injector = self.broker.fault_injector
        assert injector is not None
        state = self.state
        action = injector.on_request(
            header.api_key, header.api_version, header.correlation_id, header.client_id,
            state.listener_name, state.peer,
        )
        if action is None:
            return
        if action.kind == "delay":
            await trio.sleep(action.delay_ms / 1000)
        elif action.kind == "fail":
            raise InjectedFailure(action.error_code)
        else:
            raise CloseConnection("injected drop")

    def _encode(self, header: RequestHeader, response: Any) -> list[Segment] | None:
        if response is None:
            return None
        if isinstance(response, RawResponse):
            head = struct.pack(">i", header.correlation_id) + (
                b"\x00" if response.flexible else b""
            )
            return [_SIZE.pack(len(head) + response.size) + head, *response.segments]
        # a code newer than the request version becomes the one Kafka sends that version
        downgrade_errors(header.api_key, header.api_version, response)
        return [
            size_prefixed(
                encode_response(header.api_key, header.api_version, header.correlation_id, response)
            )
        ]

    def _authorize_controller_request(self, ctx: RequestContext) -> None:
        """The controller listener serves the nodes of the cluster (registrations, heartbeats,
        Raft, the admin requests a broker forwards after authorizing them with its caller's
        principal): as Kafka's ControllerApis, a principal without CLUSTER_ACTION on the cluster
        is refused CLUSTER_AUTHORIZATION_FAILED (ApiVersions excepted). With an authorizer, the
        nodes' own principal must therefore be a super user or hold CLUSTER_ACTION."""
        if ctx.header.api_key != ApiKey.API_VERSIONS and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            log.info("refused %s from %s on the controller listener: %s lacks CLUSTER_ACTION",
                     ApiKey(ctx.header.api_key).name, self.state.peer, self.state.principal)
            raise _Refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    def _error_segments(
        self,
        spec: HandlerSpec,
        header: RequestHeader,
        request: Any,
        code: int = ErrorCode.UNKNOWN_SERVER_ERROR,
    ) -> tuple[list[Segment] | None, bool]:
        try:
            if spec.error_response is not None:
                response = spec.error_response(request, header.api_version, ErrorCode(code))
            else:
                response = default_error_response(request, ErrorCode(code))
            if response is None:
                return None, True
            return self._encode(header, response), False
        except Exception:
            log.exception("could not build an error response for %s", spec.api_key.name)
            return None, True

    # -- writing ----------------------------------------------------------------------------------
    async def _writer(
        self, receive: trio.MemoryReceiveChannel[_Slot], scope: trio.CancelScope
    ) -> None:
        """Send the answers in request order. Answers already complete behind the one awaited
        (pipelined requests read together) leave with it in one send; one still in its handler
        is not waited for, it starts the next send."""
        zero_copy = isinstance(self.stream, trio.SocketStream)
        carry: _Slot | None = None
        try:
            async with receive:
                while True:
                    slot = carry or await _next_slot(receive)
                    carry = None
                    if slot is None:
                        break
                    while not slot.done:
                        await self._answered.park()
                    batch = [slot]
                    while not batch[-1].close and len(batch) < _WRITE_BATCH:
                        try:
                            ready = receive.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        if not ready.done:
                            carry = ready
                            break
                        batch.append(ready)
                    await self._send_batch(batch, zero_copy)
                    if batch[-1].close:
                        break
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            log.debug("connection %s: write failed: %s", self.state.peer, e)
        finally:
            if carry is not None:
                self._release(carry)
        scope.cancel()

    async def _send_batch(self, batch: list[_Slot], zero_copy: bool) -> None:
        try:
            segments = [seg for slot in batch if slot.segments for seg in slot.segments]
            if segments:
                await send_segments(self.stream, segments, zero_copy=zero_copy)
        finally:
            for slot in batch:
                self._release(slot)


async def _next_slot(receive: trio.MemoryReceiveChannel[_Slot]) -> _Slot | None:
    """The next slot in request order, None once the reader is gone; without a trip through the
    scheduler when one is already queued."""
    try:
        return receive.receive_nowait()
    except trio.WouldBlock:
        pass
    except trio.EndOfChannel:
        return None
    try:
        return await receive.receive()
    except trio.EndOfChannel:
        return None


def _exempt(api_key: int, request: Any) -> bool:
    """Requests the request quota never meters (Kafka's cluster actions): a follower's fetch
    and transaction markers."""
    if api_key == ApiKey.WRITE_TXN_MARKERS:
        return True
    if api_key == ApiKey.FETCH:
        state = getattr(request, "replica_state", None)
        replica = state.replica_id if state is not None and state.replica_id >= 0 else request.replica_id
        return bool(replica >= 0)
    return False


def default_error_response(request: Any, code: ErrorCode) -> Any:
    """`<Name>Response()` with its top-level error_code set, or None when it has none."""
    from kafkapy.protocol import messages

    name = type(request).__name__.removesuffix("Request") + "Response"
    cls = getattr(messages, name, None)
    if cls is None:
        return None
    response = cls()
    if not hasattr(response, "error_code"):
        return None
    response.error_code = int(code)
    return response
