"""The HTTP listener (`kafkapy.http.listener`, `--http`): health, readiness, metrics, status page.

Why h11 and not a hand-written parser: h11 is the sans-IO HTTP/1.1 state machine (python-hyper,
well kept, no dependencies) - the same split this project uses for Kafka (`kafkapy.protocol` is
sans-IO, `kafkapy.server` does the I/O) - and it already gets the corners right that a small
hand-written server gets wrong: keep-alive and pipelining, chunked bodies, header size limits,
`Connection: close`, HEAD. Here it is driven by trio in the broker's own process.

Why it cannot slow the Kafka path: it is its own trio listener with its own tasks; a request
costs one handler call on the trio thread (the collectors read state the broker already keeps,
see `kafkapy.server.http.metrics`). Connections are bounded (`MAX_CONNECTIONS`, then 503 and
close), an idle or slow client is dropped after `IDLE_TIMEOUT_S`, and request heads and bodies
are size-capped by h11 / `MAX_BODY_BYTES`.

Health under load: beyond `MAX_CONNECTIONS`, `HEALTH_CONNECTIONS` more are each served one
request if it is `/healthz` or `/readyz` (503 for anything else), so holding every ordinary
connection cannot make a liveness probe fail.

Routes: `add_route(method, path, handler)`; a handler gets the `HttpRequest` and returns an
`HttpResponse`. Built in: `/healthz` (the process answers) and `/readyz` (listeners bound,
metadata loaded, broker unfenced in a cluster, not shutting down) - the status page and
`/metrics` are added by `kafkapy.server.http.routes`. Other parts may add their own (fault
injection in tests).

Error handling: a malformed request gets 400 and the connection closes; a handler that raises
is logged and answered 500; socket errors end that connection only.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import h11
import trio

__all__ = [
    "HttpListener",
    "HttpRequest",
    "HttpResponse",
    "Readiness",
    "parse_http_address",
]

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 64
#: connections beyond MAX_CONNECTIONS served for one health route each (then closed), so probes
#: are answered while clients hold every ordinary connection
HEALTH_CONNECTIONS = 16
#: how long such a connection may take to send its request
HEALTH_REQUEST_TIMEOUT_S = 2.0
HEALTH_PATHS = frozenset({"/healthz", "/readyz"})
IDLE_TIMEOUT_S = 30.0
MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
RECEIVE_BYTES = 16 * 1024
LINGER_S = 1.0


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def text(cls, status: int, text: str) -> HttpResponse:
        return cls(status, text.encode())


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]
#: `(ready, reason)`: reason says what is missing when not ready
Readiness = Callable[[], tuple[bool, str]]


def parse_http_address(value: str) -> tuple[str, int]:
    """`HOST:PORT`, `[IPV6]:PORT` or a bare `PORT` (loopback) -> (host, port)."""
    value = value.strip()
    if value.isdigit():
        host, port_text = "127.0.0.1", value
    elif value.startswith("["):
        host, sep, port_text = value[1:].partition("]:")
        if not sep:
            raise ValueError(f"bad HTTP listener {value!r}: expected [HOST]:PORT")
    else:
        host, sep, port_text = value.rpartition(":")
        if not sep:
            raise ValueError(f"bad HTTP listener {value!r}: expected HOST:PORT")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"bad HTTP listener {value!r}: port must be 0..65535")
    return host or "127.0.0.1", int(port_text)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HttpListener:
    """One bound HTTP socket and its routes (see the module doc)."""

    def __init__(self, host: str, port: int, readiness: Readiness) -> None:
        self.host = host
        self.port = port
        self.readiness = readiness
        self.routes: dict[tuple[str, str], Handler] = {}
        self._tasks: list[Callable[[], Awaitable[None]]] = []
        self.open_connections = 0
        self._sockets: list[trio.SocketListener] = []
        self.add_route("GET", "/healthz", self._healthz)
        self.add_route("GET", "/readyz", self._readyz)

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve `method path` with `handler` (GET routes answer HEAD too)."""
        self.routes[(method.upper(), path)] = handler

    def add_task(self, task: Callable[[], Awaitable[None]]) -> None:
        """Run `task` beside the accept loop while the listener serves (cancelled with it)."""
        self._tasks.append(task)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def bind(self) -> None:
        """Open the socket(s); OSError if the address cannot be bound. Sets the real port."""
        self._sockets = await trio.open_tcp_listeners(self.port, host=self.host)
        self.host, self.port = self._sockets[0].socket.getsockname()[:2]
        if not _is_loopback(self.host):
            log.warning(
                "HTTP listener %s is reachable from other hosts and has no authentication",
                self.url,
            )

    async def serve(self, nursery: trio.Nursery) -> None:
        """Accept until cancelled; each connection runs in `nursery`."""
        async with trio.open_nursery() as accepts:
            for sock in self._sockets:
                accepts.start_soon(self._accept_loop, sock, nursery)
            for task in self._tasks:
                accepts.start_soon(task)

    async def aclose(self) -> None:
        for sock in self._sockets:
            await sock.aclose()

    async def _accept_loop(self, sock: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await sock.accept()
            except OSError as e:
                log.error("HTTP accept failed: %s; retrying", e)
                await trio.sleep(0.1)
                continue
            nursery.start_soon(self._serve_connection, stream)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        self.open_connections += 1
        try:
            if self.open_connections > MAX_CONNECTIONS + HEALTH_CONNECTIONS:
                await self._refuse(stream)
                return
            if self.open_connections > MAX_CONNECTIONS:
                await self._serve_health_request(stream)
                return
            await self._serve_requests(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as e:
            log.debug("HTTP connection closed: %r", e)
        finally:
            self.open_connections -= 1
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await trio.aclose_forcefully(stream)

    @staticmethod
    async def _refuse(stream: trio.SocketStream) -> None:
        body = b"too many HTTP connections\n"
        await stream.send_all(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
        )
        await _linger(stream)

    async def _serve_health_request(self, stream: trio.SocketStream) -> None:
        """Every ordinary connection is taken: answer one request if it is a health probe
        (`HEALTH_PATHS`), 503 otherwise, and close."""
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        with trio.move_on_after(HEALTH_REQUEST_TIMEOUT_S):
            request = await self._read_request(conn, stream)
        if request is None:
            return
        if isinstance(request, HttpResponse):  # malformed: its 4xx
            await self._send(conn, stream, request, head_only=False, close=True)
        else:
            response = HttpResponse.text(503, "too many HTTP connections\n")
            if request.path in HEALTH_PATHS:
                response = await self._respond(request)
            await self._send(conn, stream, response, head_only=request.method == "HEAD", close=True)
        await _linger(stream)

    async def _serve_requests(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        while True:
            with trio.move_on_after(IDLE_TIMEOUT_S) as idle:
                request = await self._read_request(conn, stream)
            if idle.cancelled_caught or request is None:
                return
            if isinstance(request, HttpResponse):  # the request was malformed: answer, close
                await self._send(conn, stream, request, head_only=False, close=True)
                await _linger(stream)
                return
            response = await self._respond(request)
            await self._send(conn, stream, response, head_only=request.method == "HEAD")
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> HttpRequest | HttpResponse | None:
        """The next whole request; an HttpResponse (4xx) for a bad one; None at end of input."""
        head: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                log.info("bad HTTP request: %s", e)
                return HttpResponse.text(e.error_status_hint, f"bad request: {e}\n")
            if event is h11.NEED_DATA:
                data = await stream.receive_some(RECEIVE_BYTES)
                conn.receive_data(data)
                if not data and conn.their_state is h11.IDLE:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > MAX_BODY_BYTES:
                    return HttpResponse.text(413, "request body too large\n")
            elif isinstance(event, h11.EndOfMessage) and head is not None:
                return _request_of(head, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _respond(self, request: HttpRequest) -> HttpResponse:
        method = "GET" if request.method == "HEAD" else request.method
        handler = self.routes.get((method, request.path))
        if handler is None:
            if any(path == request.path for _, path in self.routes):
                return HttpResponse.text(405, "method not allowed\n")
            return HttpResponse.text(404, "not found\n")
        try:
            return await handler(request)
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.path)
            return HttpResponse.text(500, "internal error\n")

    async def _send(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        response: HttpResponse,
        *,
        head_only: bool,
        close: bool = False,
    ) -> None:
        headers = [
            ("content-type", response.content_type),
            ("content-length", str(len(response.body))),
            ("cache-control", "no-store"),
            *response.headers,
        ]
        if close:
            headers.append(("connection", "close"))
        try:
            out = conn.send(h11.Response(status_code=response.status, headers=headers)) or b""
            if not head_only:
                out += conn.send(h11.Data(data=response.body)) or b""
            out += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return  # h11 refuses to answer in this state (e.g. after a protocol error): close
        await stream.send_all(out)

    # -- built-in routes ----------------------------------------------------------------------------
    async def _healthz(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse.text(200, "ok\n")

    async def _readyz(self, request: HttpRequest) -> HttpResponse:
        ready, reason = self.readiness()
        if ready:
            return HttpResponse.text(200, f"ready ({reason})\n" if reason else "ready\n")
        return HttpResponse.text(503, f"not ready: {reason}\n")


async def _linger(stream: trio.SocketStream) -> None:
    """Half-close and read what the client still sends (bounded), so that closing with unread
    input does not reset the connection before the client has read our error answer."""
    await stream.send_eof()
    with trio.move_on_after(LINGER_S):
        for _ in range(64):
            if not await stream.receive_some(RECEIVE_BYTES):
                return


def _request_of(head: h11.Request, body: bytes) -> HttpRequest:
    target = head.target.decode("latin-1")
    parts = urlsplit(target)
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in head.headers}
    return HttpRequest(
        method=head.method.decode("ascii", "replace"),
        path=parts.path or "/",
        query=parse_qs(parts.query),
        headers=headers,
        body=body,
    )
