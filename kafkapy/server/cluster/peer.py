"""Node-to-node requests: one persistent, pipelined connection per peer, speaking our own codec.

Why our own client (not a Kafka client library): the cluster's RPCs (Raft Vote/Fetch, broker
registration, replica Fetch, WriteTxnMarkers) are a handful of requests between kafkapy nodes,
encoded by the same codec the broker serves with; a trio-native client needs no thread and no
second protocol implementation.

Shape: `await PeerClient.request(api_key, version, body, timeout_s=...)` sends one request and
returns the decoded response body. Any number of tasks may call it at once on one client: their
requests are pipelined on one connection, matched back by correlation id. There is no background
reader task (so no nursery to own): whichever waiting caller holds the read lock reads frames and
hands each one to the caller it belongs to (the leader/follower pattern). trio's
`receive_some` loses no bytes when cancelled and the frame decoder keeps partial frames in this
object, so a caller that gives up (timeout, cancellation) never corrupts the stream for the others.

Error handling: every failure a caller sees is a `PeerError` - connection refused, the peer
closing the connection, a response that does not decode, or the caller's `timeout_s` running out.
A timed-out request closes the connection (Kafka's NetworkClient does the same: an unanswered
request means the connection's state is unknown), failing the other requests in flight on it;
the next request reconnects. Reconnecting backs off exponentially (50 ms doubling to 1 s) after
failed attempts, so a dead peer is not hammered; the wait for the backoff counts against the
request's own timeout.

Secured listeners (`PeerSecurity`, built from the config by `kafkapy.server.security.peer`): a
connection to another node's SSL / SASL_SSL listener does the TLS handshake (the CA of
`ssl.truststore.location`, the host name checked unless `ssl.endpoint.identification.algorithm`
is empty, this node's own certificate presented for `ssl.client.auth`), and on a SASL listener
authenticates (SaslHandshake v1 + SaslAuthenticate, PLAIN or SCRAM) before the connection takes
requests - all within the connect timeout; a refusal is a PeerError (and a WARNING: a wrong
inter-node password is an operator's problem) followed by the usual reconnect backoff.

Resource handling: `aclose()` closes the connection and fails what is in flight; a closed client
may be used again (it reconnects). `PeerPool` owns one client per node id and closes them all.
"""

from __future__ import annotations

import errno
import itertools
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from kafkapy.broker.errors import PeerError
from kafkapy.protocol import (
    ApiKey,
    FrameDecoder,
    RequestHeader,
    decode_response,
    encode_request,
    response_header_version,
)
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.primitives import Frame, r_int32, r_tags
from kafkapy.protocol.sasl import SaslError, ScramClient, plain_token
from kafkapy.server.security.inter_node import PeerSecurity

__all__ = ["PeerClient", "PeerError", "PeerPool", "PeerSecurity", "is_gone_error", "is_refused_error"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
RECEIVE_BYTES = 256 * 1024
#: response frames at least this big are received into a buffer of their own (never copied again)
OWN_BUFFER_BYTES = 64 * 1024
#: responses larger than this are a broken peer (replica fetches are bounded far below it)
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0
BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0
_GONE: tuple[tuple[type[OSError], ...], frozenset[int]] = (
    (ConnectionRefusedError, ConnectionResetError, BrokenPipeError),
    frozenset({errno.ECONNREFUSED, errno.ECONNRESET, errno.EPIPE}),
)
_REFUSED: tuple[tuple[type[OSError], ...], frozenset[int]] = (
    (ConnectionRefusedError,),
    frozenset({errno.ECONNREFUSED}),
)



def is_gone_error(error: BaseException) -> bool:
    """A refused or reset connection, also wrapped (trio's BrokenResourceError, or the
    ExceptionGroup of `open_tcp_stream`'s attempts: then every attempt must say so)."""
    return _caused_by(error, _GONE)


def is_refused_error(error: BaseException) -> bool:
    """A refused connection (wrapped as for `is_gone_error`)."""
    return _caused_by(error, _REFUSED)


def _caused_by(
    error: BaseException, kinds: tuple[tuple[type[OSError], ...], frozenset[int]], depth: int = 0
) -> bool:
    if depth > 4:
        return False
    classes, errnos = kinds
    if isinstance(error, classes) or (isinstance(error, OSError) and error.errno in errnos):
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_caused_by(e, kinds, depth + 1) for e in error.exceptions)
    inner = error.__cause__ or error.__context__
    return inner is not None and _caused_by(inner, kinds, depth + 1)


@dataclass(slots=True)
class _Waiter:
    api_key: ApiKey
    version: int
    raw: bool = False
    done: trio.Event = field(default_factory=trio.Event)
    response: Any = None
    error: PeerError | None = None

    def finish(self, response: Any = None, error: PeerError | None = None) -> None:
        if not self.done.is_set():
            self.response, self.error = response, error
            self.done.set()


def _body_of(api_key: ApiKey, version: int, frame: bytes | bytearray | memoryview) -> memoryview:
    """The response body after its header (correlation id, and tagged fields in header v1)."""
    if not response_header_version(api_key, version):
        return memoryview(frame)[4:]
    if len(frame) > 4 and frame[4] == 0:  # no header tags: the usual case, read in place
        return memoryview(frame)[5:]
    io = Frame(bytes(frame))
    r_int32(io)
    r_tags(io)
    return memoryview(frame)[io.tell() :]


class _ResponseFrames:
    """Size-prefixed response frames received with `recv_into`.

    Why not `receive_some` + `FrameDecoder`: a replica fetch answer is megabytes of record
    batches, and the decoder's path copies each byte three times (the received chunk, its
    buffer, the frame) in 256 KiB steps - the largest single cost of a follower in the RF=3
    profile. Here small frames are cut from one reused buffer, and a frame of at least
    `OWN_BUFFER_BYTES` is received straight into a bytearray of its exact size, one copy from
    the kernel; its `records` then decode as views of it, appended to the log as they are.

    Cancellation-safe like `receive_some`: a `recv_into` either took bytes or did not, and every
    partial frame stays in this object for the next call.

    Large frames are memoryviews of a buffer kept for the next large frame (`_large_frame`):
    a fresh `bytearray(size)` zero-fills megabytes per replica fetch, work the kernel's copy
    then repeats. The buffer is reused only once no view of it is alive - the caller keeps
    `records` views as long as it needs them, and a buffer still seen is never overwritten."""

    __slots__ = ("_buf", "_end", "_got", "_pending", "_spare", "_start", "_view", "sock")

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self._buf = bytearray(RECEIVE_BYTES)
        self._view = memoryview(self._buf)
        self._start = 0  # unparsed bytes are _buf[_start:_end]
        self._end = 0
        self._pending: memoryview | None = None  # a large frame being received into its own buffer
        self._got = 0
        self._spare: bytearray | None = None  # the memory of the last large frame

    def _large_frame(self, size: int) -> memoryview:
        """`size` bytes for a large frame: the last large frame's memory when nothing views it
        any more (its contents are garbage to be overwritten), else a new buffer."""
        spare = self._spare
        if spare is not None and len(spare) >= size:
            try:
                spare.append(spare.pop())  # a bytearray with live views cannot be resized
            except BufferError:
                spare = None
        else:
            spare = None
        if spare is None:
            spare = self._spare = bytearray(size + size // 4)  # room for somewhat larger ones
        return memoryview(spare)[:size]

    async def receive(self) -> list[bytes | bytearray | memoryview] | None:
        """Whatever frames one `recv_into` completes (maybe none); None when the peer closed.
        Raises ProtocolError on a negative or oversized length, before buffering the body."""
        if self._pending is not None:
            n = await self.sock.recv_into(self._pending[self._got :])
            if n == 0:
                return None
            self._got += n
            if self._got < len(self._pending):
                return []
            frame, self._pending = self._pending, None
            return [frame]
        view = self._view
        if self._start == self._end:
            self._start = self._end = 0
        elif self._end == len(self._buf):  # a partial small frame at the very end: move it down
            rest = self._end - self._start
            view[:rest] = view[self._start : self._end]
            self._start, self._end = 0, rest
        n = await self.sock.recv_into(view[self._end :])
        if n == 0:
            return None
        self._end += n
        frames: list[bytes | bytearray | memoryview] = []
        while self._end - self._start >= 4:
            start = self._start
            (size,) = _SIZE.unpack_from(self._buf, start)
            if size < 0 or size > MAX_RESPONSE_BYTES:
                raise ProtocolError(f"response size {size} outside 0..{MAX_RESPONSE_BYTES}")
            have = self._end - start - 4
            if size >= OWN_BUFFER_BYTES and have < size:
                frame = self._large_frame(size)
                frame[:have] = view[start + 4 : self._end]
                self._pending, self._got = frame, have
                self._start = self._end
                break
            if have < size:
                break
            body = view[start + 4 : start + 4 + size]
            frames.append(bytearray(body) if size >= OWN_BUFFER_BYTES else bytes(body))
            self._start = start + 4 + size
        return frames


class _StreamResponseFrames:
    """`_ResponseFrames` for a TLS stream (no socket to `recv_into`): `FrameDecoder`'s copies."""

    __slots__ = ("decoder", "stream")

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(MAX_RESPONSE_BYTES)

    async def receive(self) -> list[bytes | bytearray | memoryview] | None:
        data = await self.stream.receive_some(RECEIVE_BYTES)
        if not data:
            return None
        return [*self.decoder.feed(data)]


class _Connection:
    """One TCP connection with its in-flight table; replaced as a whole when it breaks."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.frames: _ResponseFrames | _StreamResponseFrames = (
            _ResponseFrames(stream.socket)
            if isinstance(stream, trio.SocketStream)
            else _StreamResponseFrames(stream)
        )
        self.pending: dict[int, _Waiter] = {}
        self.send_lock = trio.Lock()
        self.read_lock = trio.Lock()
        self.broken: PeerError | None = None

    def fail(self, error: PeerError) -> None:
        """Mark broken and fail every request in flight (their callers raise `error`)."""
        if self.broken is None:
            self.broken = error
        for waiter in self.pending.values():
            waiter.finish(error=error)
        self.pending.clear()


class PeerClient:
    """A pipelined request/response client to one node (see the module doc)."""

    def __init__(
        self, host: str, port: int, *, client_id: str, security: PeerSecurity | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self._conn: _Connection | None = None
        self._connect_lock = trio.Lock()
        self._correlation = itertools.count(1)
        self._backoff_s = 0.0
        self._next_attempt = 0.0

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def connected(self) -> bool:
        return self._conn is not None and self._conn.broken is None

    def __repr__(self) -> str:
        return f"PeerClient({self.host}:{self.port})"

    async def request(
        self, api_key: ApiKey, version: int, body: Any, *, timeout_s: float, raw: bool = False
    ) -> Any:
        """Send `body` as `api_key` v`version`; the decoded response body. Raises PeerError.

        `raw=True` returns the response body undecoded instead (a memoryview after the
        response header; its bytes stay as they are while any view of them is alive, and the
        memory is reused for a later large answer only after that): the replica fetcher parses
        Fetch answers itself so their record batches are never copied (protocol.fetch_response)."""
        conn: _Connection | None = None
        try:
            with trio.fail_after(timeout_s):
                conn = await self._connection()
                return await self._exchange(conn, api_key, version, body, raw)
        except trio.TooSlowError:
            error = PeerError(
                f"{api_key.name} v{version} to {self.host}:{self.port} timed out after {timeout_s:.3g} s"
            )
            if conn is not None:
                await self._drop(conn, error)
            raise error from None

    async def _exchange(
        self, conn: _Connection, api_key: ApiKey, version: int, body: Any, raw: bool
    ) -> Any:
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        try:
            frame = encode_request(
                RequestHeader(int(api_key), version, correlation_id, self.client_id), body
            )
        except ProtocolError as e:
            raise PeerError(f"cannot encode {api_key.name} v{version}: {e}") from e
        waiter = _Waiter(api_key, version, raw)
        conn.pending[correlation_id] = waiter
        try:
            async with conn.send_lock:
                if conn.broken is not None:
                    raise conn.broken
                sent = False
                try:
                    await conn.stream.send_all(_SIZE.pack(len(frame)) + frame)
                    sent = True
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
                    raise await self._drop(
                        conn,
                        PeerError(f"send to {self.host}:{self.port} failed: {e}", gone=is_gone_error(e)),
                    ) from e
                finally:
                    if not sent and conn.broken is None:
                        # cancelled part-way through a frame: the stream is unusable
                        await self._drop(
                            conn, PeerError(f"send to {self.host}:{self.port} interrupted")
                        )
            while not waiter.done.is_set():
                async with conn.read_lock:
                    if waiter.done.is_set():
                        break
                    await self._read_some(conn)
        finally:
            conn.pending.pop(correlation_id, None)
        if waiter.error is not None:
            raise waiter.error
        return waiter.response

    async def _read_some(self, conn: _Connection) -> None:
        """Receive what the socket has and deliver every complete response frame."""
        try:
            frames = await conn.frames.receive()
            if frames is None:
                raise await self._drop(
                    conn, PeerError(f"{self.host}:{self.port} closed the connection", gone=True)
                )
            for frame in frames:
                if len(frame) < 4:
                    raise ProtocolError("response frame shorter than its header")
                (correlation_id,) = _CORRELATION.unpack_from(frame)
                waiter = conn.pending.pop(correlation_id, None)
                if waiter is None:
                    continue  # its caller gave up (cancelled); nothing waits for it
                if waiter.raw:
                    waiter.finish(_body_of(waiter.api_key, waiter.version, frame))
                else:
                    _, response = decode_response(waiter.api_key, waiter.version, frame)
                    waiter.finish(response)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            raise await self._drop(
                conn,
                PeerError(f"connection to {self.host}:{self.port} failed: {e}", gone=is_gone_error(e)),
            ) from e
        except ProtocolError as e:
            raise await self._drop(
                conn, PeerError(f"bad response from {self.host}:{self.port}: {e}")
            ) from e

    async def _connection(self) -> _Connection:
        conn = self._conn
        if conn is not None and conn.broken is None:
            return conn
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and conn.broken is None:
                return conn
            await trio.sleep_until(self._next_attempt)
            try:
                with trio.fail_after(CONNECT_TIMEOUT_S):
                    conn = await self._connect()
            except (OSError, trio.TooSlowError, PeerError) as e:
                self._backoff_s = min(BACKOFF_MAX_S, max(BACKOFF_MIN_S, self._backoff_s * 2))
                self._next_attempt = trio.current_time() + self._backoff_s
                if isinstance(e, PeerError):  # TLS or SASL refused: the peer is there
                    raise
                raise PeerError(
                    f"cannot connect to {self.host}:{self.port}: {e}",
                    gone=is_gone_error(e),
                    refused=is_refused_error(e),
                ) from e
            self._backoff_s = 0.0
            self._next_attempt = 0.0
            self._conn = conn
            log.debug("connected to peer %s:%d", self.host, self.port)
            return conn

    async def _connect(self) -> _Connection:
        """A new connection, through TLS and SASL when `security` asks for them."""
        tcp = await trio.open_tcp_stream(self.host, self.port)
        security = self.security
        if security is None or (security.ssl_context is None and security.mechanism is None):
            return _Connection(tcp)
        stream: trio.abc.Stream = tcp
        try:
            if security.ssl_context is not None:
                tls = trio.SSLStream(tcp, security.ssl_context, server_hostname=self.host)
                try:
                    await tls.do_handshake()
                except trio.BrokenResourceError as e:
                    raise PeerError(
                        f"TLS handshake with {self.host}:{self.port} failed: {e.__cause__ or e}"
                    ) from e
                stream = tls
            conn = _Connection(stream)
            if security.mechanism is not None:
                await self._authenticate(conn, security)
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
        return conn

    async def _authenticate(self, conn: _Connection, security: PeerSecurity) -> None:
        """SaslHandshake v1 + SaslAuthenticate v2 rounds; PeerError when refused (their
        message classes load here: only a SASL inter-node listener needs them)."""
        from kafkapy.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest

        mechanism = security.mechanism
        assert mechanism is not None
        where = f"{self.host}:{self.port}"
        shake = await self._exchange(
            conn, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism), False
        )
        if shake.error_code != ErrorCode.NONE:
            raise self._refused(f"{where} does not enable SASL {mechanism} ({shake.mechanisms})")

        async def step(token: bytes) -> bytes:
            answer = await self._exchange(
                conn, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), False
            )
            if answer.error_code != ErrorCode.NONE:
                raise self._refused(
                    f"{where} refused SASL {mechanism} as {security.user!r}: {answer.error_message}"
                )
            return bytes(answer.auth_bytes)

        try:
            if mechanism == "PLAIN":
                await step(plain_token(security.user, security.password))
            else:
                scram = ScramClient(mechanism, security.user, security.password)
                scram.final(await step(scram.final_message(await step(scram.first()))))
        except SaslError as e:
            raise self._refused(f"SASL {mechanism} with {where}: {e.reason}") from e

    @staticmethod
    def _refused(reason: str) -> PeerError:
        log.warning("authentication to another node failed: %s", reason)
        return PeerError(reason)

    async def _drop(self, conn: _Connection, error: PeerError) -> PeerError:
        """Fail `conn` with `error` (first error wins) and close it; returns the error to raise."""
        first = conn.broken is None
        conn.fail(error)
        if self._conn is conn:
            self._conn = None
        if first:
            log.debug("peer connection %s:%d dropped: %s", self.host, self.port, error)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(conn.stream)
        return conn.broken or error

    async def aclose(self) -> None:
        conn = self._conn
        if conn is not None:
            await self._drop(conn, PeerError(f"client to {self.host}:{self.port} closed"))


class PeerPool:
    """One `PeerClient` per node id; addresses come from `resolve(node_id)` on every lookup.

    Why resolve each time: a broker's endpoint comes from its latest registration in the
    metadata image and may change across restarts; a changed address replaces the client (the
    old connection is closed in the background of the next request). Voter addresses are static.
    """

    def __init__(
        self,
        resolve: Callable[[int], tuple[str, int] | None],
        *,
        client_id: str,
        security: PeerSecurity | None = None,
        on_gone: Callable[[int], None] | None = None,
        on_reached: Callable[[int], None] | None = None,
    ) -> None:
        self._resolve = resolve
        self.client_id = client_id
        self.security = security
        #: called with the node id when a request fails with `PeerError.gone` (the node's
        #: process may be dead: the cluster node has the controller check, see node.py)
        self.on_gone = on_gone
        #: called with the node id when a request to it got its answer (it is there)
        self.on_reached = on_reached
        self._clients: dict[int, PeerClient] = {}
        self._stale: list[PeerClient] = []

    def get(self, node_id: int) -> PeerClient:
        """The client for `node_id`; PeerError when the node's address is unknown."""
        address = self._resolve(node_id)
        if address is None:
            raise PeerError(f"no known address for node {node_id}")
        client = self._clients.get(node_id)
        if client is not None and client.address == address:
            return client
        if client is not None:
            self._stale.append(client)
        client = self._clients[node_id] = PeerClient(
            address[0], address[1], client_id=self.client_id, security=self.security
        )
        return client

    async def request(
        self,
        node_id: int,
        api_key: ApiKey,
        version: int,
        body: Any,
        *,
        timeout_s: float,
        raw: bool = False,
    ) -> Any:
        """`get(node_id).request(...)`; raises PeerError."""
        if self._stale:
            stale, self._stale = self._stale, []
            for old in stale:
                await old.aclose()
        try:
            answer = await self.get(node_id).request(
                api_key, version, body, timeout_s=timeout_s, raw=raw
            )
        except PeerError as exc:
            if exc.gone and self.on_gone is not None:
                self.on_gone(node_id)
            raise
        if self.on_reached is not None:
            self.on_reached(node_id)
        return answer

    def node_ids(self) -> list[int]:
        """The nodes this pool has a client for (it asked them something): status and tests."""
        return sorted(self._clients)

    async def aclose(self) -> None:
        clients = [*self._clients.values(), *self._stale]
        self._clients.clear()
        self._stale.clear()
        for client in clients:
            await client.aclose()
