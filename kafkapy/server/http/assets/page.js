// kafkapy status page: polls /api/status, updates the tiles, draws the two charts as inline SVG
// and swaps in fresh tables (rendered by the server) every few seconds. No dependencies.
// Throughput is drawn on log axes, messages/s on the left and bytes/s on the right: a burst must
// not flatten the steady traffic beside it. The lag chart shows the group with the most lag
// until the reader picks one.
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

// a linear axis from 0 to a round max (group lag: the numbers a person compares)
function linearAxis(values, fmt) {
  const max = niceMax(Math.max(0, ...values));
  const ticks = [0, 1, 2, 3, 4].map((i) => (max * i) / 4);
  return { pos: (v) => v / max, ticks, fmt };
}

// a log axis (log10(1 + v)), so a burst of 66k msg/s leaves 47 msg/s readable beside it;
// ticks at 0 and the powers of `base` (10 for counts, 1024 for bytes) below the top
function logAxis(values, fmt, base) {
  const top = Math.max(1, Math.ceil(Math.log10(1 + Math.max(0, ...values))));
  // 1 sits a third of a decade above 0 (their labels collide): only when nothing above fits
  const ticks = [0];
  for (let v = base; Math.log10(1 + v) <= top; v *= base) ticks.push(v);
  if (ticks.length === 1) ticks.push(1);
  while (ticks.length > 6) {
    const kept = ticks.slice(1).filter((_, i) => i % 2 === 1);
    ticks.length = 1;
    ticks.push(...kept);
  }
  return { pos: (v) => Math.log10(1 + Math.max(v, 0)) / top, ticks, fmt };
}

// points: [{t, v: [y0, y1, ...]}]; axes: [{series: [indexes], make: (values) => axis}] - the
// first on the left, a second on the right; one polyline per series
function drawChart(svg, points, axes) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 600, H = 200, L = 56, T = 10, B = 24, R = axes.length > 1 ? 60 : 8;
  svg.appendChild(el("rect", { x: L, y: T, width: W - L - R, height: H - T - B, class: "plot" }));
  if (points.length < 2) {
    svg.appendChild(el("text", { x: W / 2, y: H / 2, class: "nodata", "text-anchor": "middle" }, "collecting samples..."));
    return;
  }
  const t0 = points[0].t, t1 = points[points.length - 1].t;
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  axes.forEach((spec, side) => {
    const axis = spec.make(points.flatMap((p) => spec.series.map((s) => p.v[s])));
    const y = (v) => T + (1 - axis.pos(v)) * (H - T - B);
    for (const v of axis.ticks) {
      if (side === 0) svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
      const at = side === 0 ? { x: L - 4, "text-anchor": "end" } : { x: W - R + 4, "text-anchor": "start" };
      svg.appendChild(el("text", { ...at, y: y(v) + 4, class: "axis axis-" + side }, axis.fmt(v)));
    }
    for (const s of spec.series) {
      const d = points.map((p) => x(p.t).toFixed(1) + "," + y(p.v[s]).toFixed(1)).join(" ");
      svg.appendChild(el("polyline", { points: d, class: "line s" + s, "data-series": s }));
    }
  });
  const span = Math.round((t1 - t0) / 1000);
  svg.appendChild(el("text", { x: L, y: H - 6, class: "axis" }, "-" + span + " s"));
  svg.appendChild(el("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "axis" }, "now"));
}

const THROUGHPUT_AXES = [
  { series: [0], make: (values) => logAxis(values, fmtNum, 10) },
  { series: [1, 2], make: (values) => logAxis(values, fmtBytes, 1024) },
];
const LAG_AXES = [{ series: [0], make: (values) => linearAxis(values, fmtNum) }];

// the group the lag chart shows: the one picked, else the one with the most lag
let pickedGroup = null;
function lagGroup(groups) {
  if (pickedGroup !== null && groups.some((g) => g.group_id === pickedGroup)) return pickedGroup;
  let best = null;
  for (const g of groups) if (best === null || g.lag > best.lag) best = g;
  return best ? best.group_id : "";
}

function setText(id, text) {
  const node = document.getElementById(id);
  if (node) node.textContent = text;
}

function update(status) {
  const history = status.history;
  const thr = rates(history, (a, b) => [
    b.messages_in - a.messages_in,
    b.bytes_in - a.bytes_in,
    b.bytes_out - a.bytes_out,
  ]);
  drawChart(document.getElementById("chart-throughput"), thr, THROUGHPUT_AXES);
  const last = thr.length ? thr[thr.length - 1].v : null;
  setText("rate-messages-in", last ? fmtNum(last[0]) : "-");
  setText("rate-bytes-in", last ? fmtBytes(last[1]) : "-");
  setText("rate-bytes-out", last ? fmtBytes(last[2]) : "-");
  setText("cluster-messages-in", fmtNum(status.cluster_rates.messages_in));
  setText("cluster-bytes-in", fmtBytes(status.cluster_rates.bytes_in));
  setText("connections", String(status.connections));
  setText("group-count", String(status.groups.length));
  setText("topic-count", String(status.topics.filter((t) => !t.internal).length));
  setText("partition-count", String(status.partition_count));
  setText("urp-count", String(status.under_replicated));

  const select = document.getElementById("lag-group");
  const groups = status.groups.map((g) => g.group_id);
  if (select.options.length !== groups.length || [...select.options].some((o, i) => o.value !== groups[i])) {
    select.replaceChildren(...groups.map((g) => new Option(g, g)));
  }
  select.value = lagGroup(status.groups);
  const lag = history.filter((h) => select.value in h.lag).map((h) => ({ t: h.t, v: [h.lag[select.value]] }));
  drawChart(document.getElementById("chart-lag"), lag, LAG_AXES);
}

async function refreshTables() {
  const response = await fetch("/?fragment=tables", { cache: "no-store" });
  if (!response.ok) return;
  const html = await response.text();
  const box = document.getElementById("tables");
  // keep what the reader opened or closed; new sections come as the server renders them
  const state = new Map([...box.querySelectorAll("details")].map((d) => [d.id || d.className, d.open]));
  box.innerHTML = html;
  for (const d of box.querySelectorAll("details")) {
    const key = d.id || d.className;
    if (state.has(key)) d.open = state.get(key);
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

document.getElementById("lag-group").addEventListener("change", (e) => {
  pickedGroup = e.target.value;
  if (latest) update(latest);
});
poll();
