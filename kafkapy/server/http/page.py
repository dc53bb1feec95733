"""The status page at `/`: server-rendered HTML from the same dict `/api/status` serves.

Why server-rendered with a little JS: the page works without a build step, a CDN or a framework
- the tables come from here (`render_page`, and `render_tables` for the fragment the script
swaps in every few seconds), and `assets/page.js` (plain JS, no dependencies) only polls
`/api/status` to update the tiles and draw the two inline-SVG charts (throughput, a group's
lag) from the history. Every value is escaped; nothing from a client is put into the page
without `html.escape`.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Any

__all__ = ["asset", "render_page", "render_tables"]


def asset(name: str) -> bytes:
    """A file of `kafkapy/server/http/assets/` (the page's script and style)."""
    return resources.files("kafkapy.server.http").joinpath("assets", name).read_bytes()


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _rate(n: float) -> str:
    return f"{n:.1f}" if n < 100 else f"{n:.0f}"


def _e(value: Any) -> str:
    return escape(str(value))


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _ids(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def _table(headers: list[str], rows: list[list[str]], *, cls: str = "", empty: str = "none") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="empty">{_e(empty)}</td></tr>'
    else:
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cluster(status: dict[str, Any]) -> str:
    c = status["cluster"]
    rows = [
        ["Cluster id", f"<code>{_e(c['cluster_id'])}</code>"],
        ["Mode", _e(c["mode"])],
        ["This node", _e(c["node_id"])],
        ["Controller", _e(c["controller_id"]) + (" (this node)" if c["active_controller"] else "")],
        ["Listeners", ", ".join(f"{_e(b['name'])} {_e(b['host'])}:{_e(b['port'])}" for b in c["listeners"])],
        ["Ready", "yes" if c["ready"] else f"no - {_e(c['not_ready_reason'])}"],
    ]
    quorum = c["quorum"]
    if quorum is not None:
        rows += [
            ["Raft voters", _e(_ids(quorum["voters"]))],
            ["Raft leader / epoch", f"{_e(quorum['leader_id'])} / {_e(quorum['epoch'])}"],
            ["Raft high watermark", _e(quorum["high_watermark"])],
            ["This node's Raft state", _e(quorum["state"])],
            ["Metadata applied up to", _e(quorum["metadata_offset"])],
        ]
    body = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="kv" id="cluster-table"><tbody>{body}</tbody></table>'


def _brokers(status: dict[str, Any]) -> str:
    rows = [
        [_e(b["node_id"]), _e(b["host"]), _e(b["port"]), _e(b["rack"] or "-"),
         "fenced" if b["fenced"] else ("shutting down" if b["in_controlled_shutdown"] else "active")]
        for b in status["brokers"]
    ]
    return _table(["Node", "Host", "Port", "Rack", "State"], rows, cls="brokers")


def _partitions(status: dict[str, Any], topic: str) -> str:
    rows = []
    for p in status["partitions"]:
        if p["topic"] != topic:
            continue
        local = p["local"]
        isr_cls = ' class="warn"' if len(p["isr"]) < len(p["replicas"]) else ""
        rows.append([
            _e(p["partition"]),
            _e(p["leader"]) if p["leader"] >= 0 else '<span class="warn">offline</span>',
            _e(_ids(p["replicas"])),
            f"<span{isr_cls}>{_e(_ids(p['isr']))}</span>",
            _e(p["log_start_offset"]) if local else "-",
            f'<span class="leo">{_e(p["log_end_offset"])}</span>' if local else "-",
            _e(p["high_watermark"]) if local else "-",
            _e(_bytes(p["size_bytes"])) if local else "-",
            _e(p["segments"]) if local else "-",
            _e(_rate(p["messages_per_s"])),
        ])
    return _table(
        ["Partition", "Leader", "Replicas", "ISR", "Log start", "Log end", "High watermark",
         "Size", "Segments", "Messages/s"],
        rows, cls="partitions",
    )


def _topics(status: dict[str, Any], *, internal: bool) -> str:
    parts = []
    for t in status["topics"]:
        if t["internal"] != internal:
            continue
        urp = f' <span class="warn">{t["under_replicated"]} under-replicated</span>' if t["under_replicated"] else ""
        parts.append(
            f'<details class="topic" id="topic-{_e(t["name"])}" data-topic="{_e(t["name"])}">'
            f'<summary><span class="name">{_e(t["name"])}</span>'
            f'<span class="meta"><span class="partition-count">{t["partitions"]}</span>'
            f' {_plural(t["partitions"], "partition")}'
            f' · <span class="messages">{t["messages"]}</span> messages'
            f" · {_e(_bytes(t['size_bytes']))} · {_e(_rate(t['messages_per_s']))} msg/s{urp}</span>"
            f"</summary>{_partitions(status, t['name'])}</details>"
        )
    return "".join(parts) or '<p class="empty">no topics</p>'


def _groups(status: dict[str, Any]) -> str:
    parts = []
    for g in status["groups"]:
        members = _table(
            ["Member", "Client id", "Host"],
            [[_e(m["member_id"]), _e(m["client_id"]), _e(m["client_host"])] for m in g["members"]],
            cls="members", empty="no members",
        )
        offsets = _table(
            ["Topic", "Partition", "Committed", "Log end", "Lag"],
            [[_e(o["topic"]), _e(o["partition"]), _e(o["committed"]),
              _e(o["end_offset"]) if o["end_offset"] >= 0 else "-",
              f'<span class="lag">{_e(o["lag"])}</span>' if o["lag"] is not None else "-"]
             for o in g["offsets"]],
            cls="offsets", empty="no committed offsets",
        )
        parts.append(
            f'<details class="group" id="group-{_e(g["group_id"])}" data-group="{_e(g["group_id"])}">'
            f'<summary><span class="name">{_e(g["group_id"])}</span>'
            f'<span class="meta">{_e(g["protocol"])} · <span class="state">{_e(g["state"])}</span>'
            f' · {len(g["members"])} {_plural(len(g["members"]), "member")}'
            f' · lag <span class="group-lag">{_e(g["lag"])}</span></span>'
            f"</summary>{members}{offsets}</details>"
        )
    return "".join(parts) or '<p class="empty">no consumer groups</p>'


def render_tables(status: dict[str, Any]) -> str:
    """The part of the page the script refreshes (cluster, brokers, topics, groups)."""
    internal = _topics(status, internal=True)
    return (
        f'<section><h2>Cluster and quorum</h2>{_cluster(status)}</section>'
        f'<section><h2>Brokers</h2>{_brokers(status)}</section>'
        f'<section id="topics"><h2>Topics</h2>{_topics(status, internal=False)}'
        f'<details class="internal"><summary>Internal topics</summary>{internal}</details></section>'
        f'<section id="groups"><h2>Consumer groups</h2>{_groups(status)}</section>'
    )


def _tiles(status: dict[str, Any]) -> str:
    rates = status["rates"]
    tiles = [
        ("rate-messages-in", "Messages in/s", _rate(rates["messages_in"])),
        ("rate-bytes-in", "Bytes in/s", _bytes(rates["bytes_in"])),
        ("rate-bytes-out", "Bytes out/s", _bytes(rates["bytes_out"])),
        ("connections", "Connections", str(status["connections"])),
        ("topic-count", "Topics", str(sum(1 for t in status["topics"] if not t["internal"]))),
        ("partition-count", "Partitions", str(status["partition_count"])),
        ("group-count", "Groups", str(len(status["groups"]))),
        ("urp-count", "Under-replicated", str(status["under_replicated"])),
    ]
    return "".join(
        f'<div class="tile"><div class="value" id="{tid}">{_e(value)}</div><div class="label">{_e(label)}</div></div>'
        for tid, label, value in tiles
    )


def render_page(status: dict[str, Any]) -> str:
    c = status["cluster"]
    ready = '<span class="badge ok">ready</span>' if c["ready"] else '<span class="badge bad">not ready</span>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kafkapy - node {_e(c['node_id'])}</title>
<link rel="stylesheet" href="/assets/page.css">
</head><body>
<header><h1>kafkapy</h1><span class="sub">node {_e(c['node_id'])} · {_e(c['mode'])} ·
cluster <code>{_e(c['cluster_id'])}</code> · v{_e(c['version'])}</span> {ready}
<span class="links"><a href="/metrics">/metrics</a> <a href="/api/status">/api/status</a></span></header>
<main>
<div class="tiles">{_tiles(status)}</div>
<div class="charts">
<figure><figcaption>Throughput (last minutes)</figcaption>
<svg id="chart-throughput" class="chart" viewBox="0 0 600 200" role="img" aria-label="throughput chart"></svg>
<div class="legend"><span class="s0">messages in/s</span> <span class="s1">KiB in/s</span> <span class="s2">KiB out/s</span></div></figure>
<figure><figcaption>Consumer group lag <select id="lag-group" aria-label="group"></select></figcaption>
<svg id="chart-lag" class="chart" viewBox="0 0 600 200" role="img" aria-label="group lag chart"></svg>
<div class="legend"><span class="s0">total lag (messages)</span></div></figure>
</div>
<div id="tables">{render_tables(status)}</div>
</main>
<footer>Tables refresh every few seconds; charts sample every {status['sample_s']:.0f} s.</footer>
<script src="/assets/page.js"></script>
</body></html>
"""
