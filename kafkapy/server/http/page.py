"""The status page at `/`: server-rendered HTML from the same dict `/api/status` serves.

Why server-rendered with a little JS: the page works without a build step, a CDN or a framework
- the tables come from here (`render_page`, and `render_tables` for the fragment the script
swaps in every few seconds), and `assets/page.js` (plain JS, no dependencies) only polls
`/api/status` to update the tiles and draw the two inline-SVG charts (throughput, a group's
lag) from the history. Every value is escaped; nothing from a client is put into the page
without `html.escape`.

What goes where: health first (readiness, offline and uncleanable logs), then topics, the hot
partitions and groups - expanded while there are few enough to read at a glance
(`OPEN_UP_TO`) - and on a single node the Raft quorum (of one, nothing to watch) collapsed at the
bottom. Sizes are this node's replicas' (the CLI's `topics describe` sums every replica), and
say so.
"""

from __future__ import annotations

import time
from html import escape
from importlib import resources
from typing import Any

__all__ = ["OPEN_UP_TO", "asset", "render_page", "render_tables"]

#: topics (non-internal) and groups shown expanded when there are at most this many
OPEN_UP_TO = 5


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
    if not _single_node(status):
        rows += _raft_rows(status)
    return _kv(rows, "cluster-table")


def _kv(rows: list[list[str]], table_id: str) -> str:
    body = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in rows)
    return f'<table class="kv" id="{table_id}"><tbody>{body}</tbody></table>'


def _single_node(status: dict[str, Any]) -> bool:
    return bool(status["cluster"]["mode"] == "single node")


def _raft_rows(status: dict[str, Any]) -> list[list[str]]:
    quorum = status["cluster"]["quorum"]
    if quorum is None:
        return []
    return [
        ["Raft voters", _e(_ids(quorum["voters"]))],
        ["Raft leader / epoch", f"{_e(quorum['leader_id'])} / {_e(quorum['epoch'])}"],
        ["Raft high watermark", _e(quorum["high_watermark"])],
        ["This node's Raft state", _e(quorum["state"])],
        ["Metadata applied up to", _e(quorum["metadata_offset"])],
    ]


def _raft_internals(status: dict[str, Any]) -> str:
    """A single node's metadata quorum (of one), collapsed at the bottom of the page."""
    if not _single_node(status) or status["cluster"]["quorum"] is None:
        return ""
    return (
        '<details class="raft" id="raft-internals"><summary>Raft metadata quorum '
        f'(a quorum of one)</summary>{_kv(_raft_rows(status), "raft-table")}</details>'
    )


def _storage(status: dict[str, Any]) -> str:
    """Offline partition logs and the partitions the log cleaner gave up on."""
    storage = status["storage"]
    offline, uncleanable = storage["offline"], storage["uncleanable"]
    if not offline and not uncleanable:
        return '<p class="ok" id="storage-ok">All partition logs online; no uncleanable partitions.</p>'
    parts = []
    if offline:
        parts.append('<h3 class="warn">Offline partition logs</h3>' + _table(
            ["Topic", "Partition", "Data dir", "Why"],
            [[_e(o["topic"]), _e(o["partition"]), f"<code>{_e(o['data_dir'])}</code>", _e(o["reason"])]
             for o in offline],
            cls="offline-logs",
        ))
    if uncleanable:
        parts.append('<h3 class="warn">Uncleanable partitions (the log cleaner skips them)</h3>' + _table(
            ["Topic", "Partition", "Data dir", "Why", "Since"],
            [[_e(u["topic"]), _e(u["partition"]), f"<code>{_e(u['data_dir'])}</code>", _e(u["reason"]),
              f'<time data-ms="{_e(u["since_ms"])}">{_e(_utc(u["since_ms"]))}</time>']
             for u in uncleanable],
            cls="uncleanable",
        ))
    return "".join(parts)


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _brokers(status: dict[str, Any]) -> str:
    budget = status["partition_budget"]["max_broker_partitions"]
    rows = [
        [_e(b["node_id"]), _e(b["host"]), _e(b["port"]), f'<span class="rack">{_e(b["rack"] or "-")}</span>',
         "fenced" if b["fenced"] else ("shutting down" if b["in_controlled_shutdown"] else "active"),
         _e(b["leaders"]), _budget_cell(b["replicas"], budget)]
        for b in status["brokers"]
    ]
    return _budget_line(status) + _table(
        ["Node", "Host", "Port", "Rack", "State", "Leaders", "Replicas / max.broker.partitions"],
        rows, cls="brokers",
    )


#: a broker's replicas at or above this share of its budget are shown as a warning
BUDGET_WARN_RATIO = 0.9


def _budget_cell(replicas: int, budget: int | None) -> str:
    if budget is None:
        return f'<span class="budget">{_e(replicas)}</span>'
    warn = ' warn' if replicas >= BUDGET_WARN_RATIO * budget else ""
    return (f'<span class="budget{warn}">{_e(replicas)} / {_e(budget)}'
            f' ({_e(round(100 * replicas / max(budget, 1)))}%)</span>')


def _budget_line(status: dict[str, Any]) -> str:
    """The partition budgets (KIP-578) in one line above the brokers."""
    b = status["partition_budget"]
    per_broker = b["max_broker_partitions"]
    total = b["max_partitions"]
    return (
        '<p class="budgets" id="partition-budget">Partition budgets: '
        f'<code>max.broker.partitions={_e(per_broker if per_broker is not None else "unlimited")}</code> · '
        f'<code>max.partitions={_e(total if total is not None else "unlimited")}</code>'
        f' ({_e(b["partitions"])} {_plural(b["partitions"], "partition")} in the cluster)</p>'
    )


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
            _e(_bytes(p["bytes_per_s"])),
        ])
    return _table(
        ["Partition", "Leader", "Replicas", "ISR", "Log start", "Log end", "High watermark",
         "Size (this replica)", "Segments", "Messages/s", "Bytes in/s"],
        rows, cls="partitions",
    )


def _configs(configs: dict[str, str]) -> str:
    if not configs:
        return '<p class="configs">Configs: broker defaults only.</p>'
    shown = ", ".join(f"<code>{_e(k)}={_e(v)}</code>" for k, v in sorted(configs.items()))
    return f'<p class="configs">Configs set on the topic: {shown}</p>'


def _open(count: int) -> str:
    return " open" if count <= OPEN_UP_TO else ""


def _topics(status: dict[str, Any], *, internal: bool) -> str:
    parts = []
    topics = [t for t in status["topics"] if t["internal"] == internal]
    is_open = "" if internal else _open(len(topics))
    for t in topics:
        urp = f' <span class="warn">{t["under_replicated"]} under-replicated</span>' if t["under_replicated"] else ""
        parts.append(
            f'<details class="topic" id="topic-{_e(t["name"])}" data-topic="{_e(t["name"])}"{is_open}>'
            f'<summary><span class="name">{_e(t["name"])}</span>'
            f'<span class="meta"><span class="partition-count">{t["partitions"]}</span>'
            f' {_plural(t["partitions"], "partition")}'
            f' · <span class="messages">{t["messages"]}</span> messages'
            f' · <span class="size" title="the sum over this node\'s replicas; kafkapy topics describe sums every replica">'
            f"{_e(_bytes(t['size_bytes']))} (this node's replicas)</span>"
            f" · {_e(_rate(t['messages_per_s']))} msg/s · {_e(_bytes(t['bytes_per_s']))}/s{urp}</span>"
            f"</summary>{_configs(t['configs'])}{_partitions(status, t['name'])}</details>"
        )
    return "".join(parts) or '<p class="empty">no topics</p>'


def _hot(status: dict[str, Any]) -> str:
    rows = [
        [_e(p["topic"]), _e(p["partition"]), _e(_bytes(p["bytes_per_s"])),
         _e(_rate(p["messages_per_s"])), _e(_bytes(p["size_bytes"])),
         _e(p["leader"]) if p["leader"] >= 0 else '<span class="warn">offline</span>']
        for p in status["hot_partitions"]
    ]
    return _table(
        ["Topic", "Partition", "Bytes in/s", "Messages/s", "Size (this replica)", "Leader"],
        rows, cls="hot-partitions", empty="no partitions with a replica here",
    )


def _tiered(status: dict[str, Any]) -> str:
    """Tiered topics (KIP-405): local vs remote bytes, copier lag, remote fetches and errors."""
    rows = [
        [_e(t["name"]), _e(_bytes(t["local_bytes"])), _e(_bytes(t["remote_bytes"])),
         _e(f"{_bytes(t['copy_lag_bytes'])} ({t['copy_lag_segments']} "
            f"{_plural(t['copy_lag_segments'], 'segment')})"),
         _e(_rate(t["remote_fetches_per_s"])), _e(_bytes(t["remote_fetch_bytes_per_s"])),
         (f'<span class="warn">{_e(t["remote_fetch_errors"])} '
          f'({_e(_rate(t["remote_fetch_errors_per_s"]))}/s)</span>')
         if t["remote_fetch_errors"] else "0"]
        for t in status.get("tiered", [])
    ]
    return _table(
        ["Topic", "Local (this node's replicas)", "Remote", "Copier lag (led here)",
         "Remote fetches/s", "Remote bytes/s", "Remote fetch errors"],
        rows, cls="tiered-topics", empty="no topics with remote.storage.enable=true",
    )


def _groups(status: dict[str, Any]) -> str:
    parts = []
    is_open = _open(len(status["groups"]))
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
            f'<details class="group" id="group-{_e(g["group_id"])}" data-group="{_e(g["group_id"])}"{is_open}>'
            f'<summary><span class="name">{_e(g["group_id"])}</span>'
            f'<span class="meta">{_e(g["protocol"])} · <span class="state">{_e(g["state"])}</span>'
            f' · {len(g["members"])} {_plural(len(g["members"]), "member")}'
            f' · lag <span class="group-lag">{_e(g["lag"])}</span></span>'
            f"</summary>{members}{offsets}</details>"
        )
    return "".join(parts) or '<p class="empty">no consumer groups</p>'


def render_tables(status: dict[str, Any]) -> str:
    """The part of the page the script refreshes (see the module doc for the order)."""
    internal = _topics(status, internal=True)
    return (
        f'<section><h2>Cluster</h2>{_cluster(status)}</section>'
        f'<section id="storage"><h2>Storage health</h2>{_storage(status)}</section>'
        f'<section id="topics"><h2>Topics</h2>{_topics(status, internal=False)}'
        f'<details class="internal" id="internal-topics"><summary>Internal topics</summary>{internal}</details></section>'
        + (f'<section id="tiered"><h2>Tiered storage <span class="sub">KIP-405, per topic</span></h2>{_tiered(status)}</section>'
           if status.get("tiered") else "")
        + f'<section id="hot"><h2>Hot partitions <span class="sub">by bytes in/s, on this node</span></h2>{_hot(status)}</section>'
        f'<section id="groups"><h2>Consumer groups</h2>{_groups(status)}</section>'
        f'<section id="brokers"><h2>Brokers <span class="sub">racks, leaders, partition budget</span></h2>{_brokers(status)}</section>'
        f"{_raft_internals(status)}"
    )


def _tiles(status: dict[str, Any]) -> str:
    rates, cluster = status["rates"], status["cluster_rates"]
    tiles = [
        ("cluster-messages-in", "Cluster msgs in/s", _rate(cluster["messages_in"])),
        ("cluster-bytes-in", "Cluster bytes in/s", _bytes(cluster["bytes_in"])),
        ("rate-messages-in", "Node msgs in/s", _rate(rates["messages_in"])),
        ("rate-bytes-in", "Node bytes in/s", _bytes(rates["bytes_in"])),
        ("rate-bytes-out", "Node bytes out/s", _bytes(rates["bytes_out"])),
        ("connections", "Connections", str(status["connections"])),
        ("topic-count", "Topics", str(sum(1 for t in status["topics"] if not t["internal"]))),
        ("partition-count", "Partitions", str(status["partition_count"])),
        ("group-count", "Groups", str(len(status["groups"]))),
        ("urp-count", "Under-replicated", str(status["under_replicated"])),
    ]
    coverage = (
        f"partitions with a replica on this node: {cluster['partitions_seen']} of "
        f"{cluster['partitions']}"
    )
    return "".join(
        f'<div class="tile"{_tile_title(tid, coverage)}><div class="value" id="{tid}">{_e(value)}</div>'
        f'<div class="label">{_e(label)}</div></div>'
        for tid, label, value in tiles
    )


def _tile_title(tile_id: str, coverage: str) -> str:
    if tile_id.startswith("cluster-"):
        return f' title="{_e(coverage)}"'
    if tile_id.startswith("rate-"):
        return ' title="what this node appended as leader and served to consumers"'
    return ""


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
<figure><figcaption>Throughput of this node (last minutes, log scale)</figcaption>
<svg id="chart-throughput" class="chart" viewBox="0 0 600 200" role="img" aria-label="throughput chart"></svg>
<div class="legend"><span class="s0">messages in/s (left axis)</span> <span class="s1">bytes in/s</span> <span class="s2">bytes out/s (right axis)</span></div></figure>
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
