"""The broker's HTTP routes beyond /healthz and /readyz: `/metrics`, the status page and its
JSON (`kafkapy.server.http.status`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkapy.server.http.listener import HttpListener, HttpRequest, HttpResponse
from kafkapy.server.http.metrics import metrics_registry, render_metrics

if TYPE_CHECKING:
    from kafkapy.server.app import Server

__all__ = ["install_routes"]


def install_routes(http: HttpListener, server: Server) -> None:
    registry = metrics_registry(server)

    async def metrics(request: HttpRequest) -> HttpResponse:
        body, content_type = render_metrics(registry, request.headers.get("accept"))
        return HttpResponse(200, body, content_type)

    http.add_route("GET", "/metrics", metrics)
