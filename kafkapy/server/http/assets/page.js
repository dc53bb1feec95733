// kafkapy status page: polls /api/status, updates the tiles, draws the two charts as inline SVG
// and swaps in fresh tables (rendered by the server) every few seconds. No dependencies.
"use strict";

const POLL_MS = 2000;
const TABLES_EVERY = 3; // polls (the tables: every 6 s)
const SVG = "http://www.w3.org/2000/svg";
let polls = 0;

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? n.toFixed(0) + " B" : n.toFixed(1) + " " + units[i];
}

function fmtNum(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return n < 100 ? n.toFixed(1) : n.toFixed(0);
}

// rates per second between consecutive samples: [{t, v: [..series]}]
function rates(history, pick) {
  const out = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1], b = history[i];
    const dt = (b.t - a.t) / 1000;
    if (dt <= 0) continue;
    out.push({ t: b.t, v: pick(a, b).map((d) => Math.max(d, 0) / dt) });
  }
  return out;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// the smallest 1, 2, 4 or 5 times a power of ten at or above `max`, so the quarter ticks are round
function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(max)));
  for (const step of [1, 2, 4, 5, 10]) if (step * power >= max) return step * power;
  return 10 * power;
}

// points: [{t, v: [y0, y1, ...]}]; draws one polyline per series with a y axis from 0 to max
function drawChart(svg, points, fmt) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 600, H = 200, L = 56, R = 8, T = 10, B = 24;
  svg.appendChild(el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "plot" }));
  if (points.length < 2) {
    svg.appendChild(el("text", { x: W / 2, y: H / 2, class: "nodata", "text-anchor": "middle" }, "collecting samples..."));
    return;
  }
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  let max = 0;
  for (const p of points) for (const v of p.v) max = Math.max(max, v);
  max = niceMax(max);
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    svg.appendChild(el("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end", class: "axis" }, fmt(v)));
  }
  const span = Math.round((t1 - t0) / 1000);
  svg.appendChild(el("text", { x: L, y: H - 6, class: "axis" }, "-" + span + " s"));
  svg.appendChild(el("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "axis" }, "now"));
  const series = points[0].v.length;
  for (let s = 0; s < series; s++) {
    const d = points.map((p) => x(p.t).toFixed(1) + "," + y(p.v[s]).toFixed(1)).join(" ");
    svg.appendChild(el("polyline", { points: d, class: "line s" + s, "data-series": s }));
  }
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}

function update(status) {
  const history = status.history;
  const thr = rates(history, (a, b) => [
    b.messages_in - a.messages_in,
    (b.bytes_in - a.bytes_in) / 1024,
    (b.bytes_out - a.bytes_out) / 1024,
  ]);
  drawChart(document.getElementById("chart-throughput"), thr, fmtNum);
  const last = thr.length ? thr[thr.length - 1].v : null;
  setText("rate-messages-in", last ? fmtNum(last[0]) : "-");
  setText("rate-bytes-in", last ? fmtBytes(last[1] * 1024) : "-");
  setText("rate-bytes-out", last ? fmtBytes(last[2] * 1024) : "-");
  setText("connections", String(status.connections));
  setText("group-count", String(status.groups.length));
  setText("topic-count", String(status.topics.filter((t) => !t.internal).length));
  setText("partition-count", String(status.partition_count));
  setText("urp-count", String(status.under_replicated));

  const select = document.getElementById("lag-group");
  const groups = status.groups.map((g) => g.group_id);
  const chosen = select.value || groups[0] || "";
  if (select.options.length !== groups.length || [...select.options].some((o, i) => o.value !== groups[i])) {
    select.replaceChildren(...groups.map((g) => new Option(g, g)));
  }
  select.value = groups.includes(chosen) ? chosen : (groups[0] || "");
  const lag = history.filter((h) => select.value in h.lag).map((h) => ({ t: h.t, v: [h.lag[select.value]] }));
  drawChart(document.getElementById("chart-lag"), lag, fmtNum);
}

async function refreshTables() {
  const response = await fetch("/?fragment=tables", { cache: "no-store" });
  if (!response.ok) return;
  const html = await response.text();
  const box = document.getElementById("tables");
  const open = [...box.querySelectorAll("details[open]")].map((d) => d.id || d.className);
  box.innerHTML = html;
  for (const d of box.querySelectorAll("details")) {
    if (open.includes(d.id || d.className)) d.open = true;
  }
}

let latest = null;
async function poll() {
  try {
    const response = await fetch("/api/status?summary=1", { cache: "no-store" });
    if (response.ok) {
      latest = await response.json();
      update(latest);
      document.body.dataset.polls = String(++polls);
      if (polls % TABLES_EVERY === 0) await refreshTables();
    }
  } catch (e) {
    document.body.dataset.error = String(e);
  }
  setTimeout(poll, POLL_MS);
}

document.getElementById("lag-group").addEventListener("change", () => latest && update(latest));
poll();
