"""The broker's HTTP routes beyond /healthz and /readyz: `/metrics`, the status page at `/`
(with `?fragment=tables` for the part its script refreshes), `/api/status` (the JSON the page
polls) and the page's two assets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import trio

from kafkapy.server.http.listener import HttpListener, HttpRequest, HttpResponse
from kafkapy.server.http.metrics import MetricsEndpoint
from kafkapy.server.http.page import asset, render_page, render_tables
from kafkapy.server.http.status import History, status_json

if TYPE_CHECKING:
    from kafkapy.server.http.host import ServedNode

__all__ = ["install_routes"]

HTML = "text/html; charset=utf-8"
_ASSET_TYPES = {"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"}


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def install_routes(http: HttpListener, server: ServedNode) -> None:
    endpoint = MetricsEndpoint(server)
    history = History(server)
    http.add_task(history.run)

    async def metrics(request: HttpRequest) -> HttpResponse:
        body, content_type = await endpoint.render(request.headers.get("accept"))
        return HttpResponse(200, body, content_type)

    # The data is gathered on the trio thread (the broker's state lives there); turning it into
    # HTML or JSON happens in a worker thread, as /metrics' formatting does.
    async def page(request: HttpRequest) -> HttpResponse:
        status = status_json(server, history)
        render = render_tables if request.arg("fragment") == "tables" else render_page
        html = await trio.to_thread.run_sync(render, status)
        return HttpResponse(200, html.encode(), HTML)

    async def api_status(request: HttpRequest) -> HttpResponse:
        status = status_json(server, history, summary=request.arg("summary") == "1")
        body = await trio.to_thread.run_sync(_json, status)
        return HttpResponse(200, body, "application/json")

    http.add_route("GET", "/metrics", metrics)
    http.add_route("GET", "/", page)
    http.add_route("GET", "/api/status", api_status)
    for name, content_type in _ASSET_TYPES.items():
        body = asset(name)

        async def serve_asset(request: HttpRequest, body: bytes = body, content_type: str = content_type) -> HttpResponse:
            return HttpResponse(200, body, content_type)

        http.add_route("GET", f"/assets/{name}", serve_asset)
