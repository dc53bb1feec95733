"""The trio side of a secured connection: the TLS handshake, then the SASL exchange.

Why a phase of its own before the connection's reader and writer start: until the client has
authenticated, nothing is pipelined or run concurrently - each frame is answered in turn by
`kafkapy.protocol.sasl.SaslSession` (which says what may come when) - so the request path of an
authenticated or plaintext connection carries no SASL check at all: no per-request cost.

Flow: ApiVersions is answered as on any listener; SaslHandshake picks the mechanism;
SaslAuthenticate requests (or, after SaslHandshake v0, raw size-prefixed tokens: KIP-43's legacy
flow) carry the mechanism's tokens. Frames the client sent right behind its last SASL message are
handed back to the connection, which serves them as the first requests.

Error handling (Kafka's behaviour): a request other than those three before authentication, a
malformed frame or an out-of-order SASL request -> the connection is closed without an answer;
a failed authentication -> SaslAuthenticate answers SASL_AUTHENTICATION_FAILED with a message,
then the connection closes (a legacy raw token gets no answer, just the close); an unknown
mechanism -> UNSUPPORTED_SASL_MECHANISM with the enabled list, then the close. Failures are
logged at info level with the peer, never the password.

Resource handling: the caller (`Connection.run`) owns the stream and closes it whenever this
returns None. The whole phase obeys the connection's idle timeout per frame. A failed
authentication closes only after `connection.failed.authentication.delay.ms` (100 ms), as Kafka. Until SASL
completes, a frame may be at most `sasl.server.max.receive.size` (512 KiB, Kafka's cap since
CVE-2022-34917) instead of `socket.request.max.bytes`: a bigger size prefix closes the
connection before any of its body is buffered, so unauthenticated peers cannot make the broker
hold 100 MiB each. (A frame a client pipelines right behind its last SASL message is read under
the same cap; clients wait for the SaslAuthenticate answer first.)
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any, Protocol

import trio

from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.api_versions import unsupported_version_response
from kafkapy.broker.handlers.registry import HandlerSpec, lookup
from kafkapy.protocol import ApiKey, decode_request, encode_response
from kafkapy.protocol.errors import ErrorCode, ProtocolError, UnsupportedVersionError
from kafkapy.protocol.sasl import SaslError, SaslSession, SaslState
from kafkapy.server.broker import Broker
from kafkapy.server.frames import FrameSource, request_header_prefix, send_frame

if TYPE_CHECKING:
    from kafkapy.protocol import RequestHeader
    from kafkapy.server.security.listener import ListenerSecurity

__all__ = ["Connection", "authenticate"]

log = logging.getLogger(__name__)


class Connection(Protocol):
    """What the authentication phase uses of a client connection (`connection.Connection`)."""

    broker: Broker
    stream: trio.abc.Stream
    state: ConnectionState
    idle_s: float
    max_request_bytes: int


async def authenticate(
    conn: Connection, security: ListenerSecurity, source: FrameSource
) -> list[bytes | bytearray] | None:
    """Handshake TLS and authenticate SASL as the listener requires; the frames already read
    behind the last SASL message on success, None when the connection must close."""
    peer = conn.state.peer
    stream = conn.stream
    if isinstance(stream, trio.SSLStream):
        with trio.move_on_after(conn.idle_s) as scope:
            try:
                await stream.do_handshake()
            except trio.BrokenResourceError as e:
                cause = e.__cause__ or e
                log.info("TLS handshake with %s failed: %s%s", peer, cause, _not_tls_hint(conn, cause))
                return None
        if scope.cancelled_caught:
            log.info("TLS handshake with %s timed out", peer)
            return None
    if not security.sasl:
        return []
    session = security.new_session()
    source.max_frame_bytes = min(security.max_receive_bytes, conn.max_request_bytes)
    while True:
        with trio.move_on_after(conn.idle_s) as scope:
            try:
                frames = await source.receive()
            except ProtocolError as e:
                log.warning("closing connection %s before authentication: %s", peer, e.reason)
                return None
        if scope.cancelled_caught:
            log.info("closing connection %s: not authenticated within %.0f s", peer, conn.idle_s)
            return None
        if not frames:
            return None
        for i, frame in enumerate(frames):
            if not await _serve(conn, session, frame):
                if session.state is SaslState.FAILED and security.failed_auth_delay_s > 0:
                    # Kafka's connection.failed.authentication.delay.ms: the answer is out, the
                    # close waits, so guessing passwords costs a client time per attempt
                    await trio.sleep(security.failed_auth_delay_s)
                return None
            if session.state is SaslState.COMPLETE:
                conn.state.principal = f"User:{session.principal}"
                _count_authentication(conn, session, succeeded=True)
                log.debug(
                    "connection %s authenticated as %s (%s)",
                    peer,
                    session.principal,
                    session.mechanism_name,
                )
                source.max_frame_bytes = conn.max_request_bytes
                return frames[i + 1 :]


def _not_tls_hint(conn: Connection, error: BaseException) -> str:
    """Name a client that is not speaking TLS at all (OpenSSL's reason for its first bytes),
    counted per listener like other non-Kafka clients."""
    reason = getattr(error, "reason", None)
    kind, hint = {
        "HTTP_REQUEST": ("HTTP", " - a non-Kafka client (HTTP) on a TLS listener"),
        "WRONG_VERSION_NUMBER": (
            "plaintext", " - not a TLS client hello: a plaintext client on a TLS listener?"
        ),
    }.get(str(reason), ("", ""))
    if kind:
        conn.broker.stats.non_kafka_connections[(conn.state.listener_name, kind)] += 1
    return hint


def _count_authentication(conn: Connection, session: SaslSession, *, succeeded: bool) -> None:
    key = (conn.state.listener_name, session.mechanism_name or "unknown", succeeded)
    conn.broker.stats.authentications[key] += 1


async def _send(conn: Connection, body: bytes) -> None:
    await send_frame(conn.stream, body)


async def _answer(conn: Connection, session: SaslSession, header: RequestHeader, request: Any,
                  spec: HandlerSpec) -> bool:
    """Answer ApiVersions, SaslHandshake or SaslAuthenticate; False when the connection must
    close after the answer (a mechanism not enabled, a failed authentication). The SASL
    message classes load with the first SASL connection."""
    from kafkapy.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

    peer = conn.state.peer
    response: Any
    keep = True
    if header.api_key == ApiKey.API_VERSIONS:
        response = await spec.func(RequestContext(conn.broker.ports, header, conn.state, -1), request)
    elif header.api_key == ApiKey.SASL_HANDSHAKE:
        code = session.handshake(request.mechanism, header.api_version)
        if code != ErrorCode.NONE:
            log.info(
                "closing connection %s: SASL mechanism %r is not enabled", peer, request.mechanism
            )
            keep = False
        response = SaslHandshakeResponse(error_code=code, mechanisms=session.enabled_mechanisms)
    else:  # SaslAuthenticate: the only other API check_request lets through
        try:
            token = session.authenticate(bytes(request.auth_bytes))
            response = SaslAuthenticateResponse(auth_bytes=token, session_lifetime_ms=0)
        except SaslError as e:
            log.info("SASL authentication of %s failed: %s", peer, e.reason)
            _count_authentication(conn, session, succeeded=False)
            response = SaslAuthenticateResponse(error_code=e.error_code, error_message=e.reason)
            keep = False
    await _send(
        conn, encode_response(header.api_key, header.api_version, header.correlation_id, response)
    )
    return keep


async def _serve(conn: Connection, session: SaslSession, frame: bytes | bytearray) -> bool:
    """Answer one frame before authentication; False when the connection must close."""
    peer = conn.state.peer
    if session.legacy and session.state is SaslState.AUTHENTICATE:
        try:
            answer = session.authenticate(bytes(frame))
        except SaslError as e:
            log.info("SASL authentication of %s failed: %s", peer, e.reason)
            _count_authentication(conn, session, succeeded=False)
            return False
        await _send(conn, answer)
        return True
    try:
        header, request = decode_request(frame)
    except UnsupportedVersionError as e:
        if len(frame) >= 8 and struct.unpack_from(">h", frame)[0] == ApiKey.API_VERSIONS:
            header_prefix = request_header_prefix(frame)
            if header_prefix is not None:
                await _send(conn, unsupported_version_response(header_prefix))
                return True
        log.warning("closing connection %s before authentication: %s", peer, e.reason)
        return False
    except ProtocolError as e:
        log.warning(
            "closing connection %s before authentication: malformed request: %s", peer, e.reason
        )
        return False
    try:
        session.check_request(header.api_key)
    except SaslError as e:
        log.warning("closing connection %s: %s", peer, e.reason)
        return False
    spec = lookup(header.api_key)
    if spec is None or not spec.supports(header.api_version):
        if header.api_key == ApiKey.API_VERSIONS:
            await _send(conn, unsupported_version_response(header))
            return True
        log.warning(
            "closing connection %s: no handler for api key %d v%d",
            peer,
            header.api_key,
            header.api_version,
        )
        return False
    return await _answer(conn, session, header, request, spec)
