// The tenant portal's endpoint statistics (loaded before portal.js, whose
// endpoint page draws them): success rate, latency and volume over 24
// hours and 7 days, from GET …/subscriptions/{id}/stats. The chart is SVG
// built node by node (no markup parsed), with axes, labels and a legend;
// failed attempts are striped as well as red, so colour is not the only
// sign.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  node.append(...children);
  return node;
}

function percent(rate) {
  return rate === null || rate === undefined ? "—" : `${(rate * 100).toFixed(rate === 1 ? 0 : 1)} %`;
}

function summary(label, w) {
  const latency = w.latency_ms ? `, p50 ${w.latency_ms.p50} ms, p95 ${w.latency_ms.p95} ms` : "";
  return `${label}: ${w.attempts} attempt${w.attempts === 1 ? "" : "s"}, ${percent(w.success_rate)} delivered${latency}.`;
}

// Stacked bars of the hourly buckets: delivered below, failed (striped)
// above, a y axis from 0 to the busiest hour and an x label every 6 hours.
function hourlyChart(hourly) {
  const [w, h, left, bottom] = [600, 150, 40, 22];
  const top = Math.max(1, ...hourly.map((b) => b.delivered + b.failed));
  const y = (n) => h - bottom - (n / top) * (h - bottom - 10);
  const slot = (w - left) / hourly.length;
  const stripes = svg("pattern", { id: "failed-stripes", width: 6, height: 6, patternUnits: "userSpaceOnUse",
    patternTransform: "rotate(45)" }, svg("rect", { width: 6, height: 6, class: "failed" }),
  svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, class: "stripe" }));
  const parts = [svg("defs", {}, stripes),
    svg("line", { x1: left, y1: y(0), x2: w, y2: y(0), class: "axis" }),
    svg("line", { x1: left, y1: y(top), x2: left, y2: y(0), class: "axis" }),
    svg("text", { x: left - 6, y: y(0) + 4, "text-anchor": "end" }, "0"),
    svg("text", { x: left - 6, y: y(top) + 4, "text-anchor": "end" }, String(top))];
  hourly.forEach((b, i) => {
    const x = left + i * slot + 2;
    const at = new Date(b.start);
    const title = svg("title", {}, `${field(at)}: ${b.delivered} delivered, ${b.failed} failed`);
    const bar = svg("g", {}, title,
      svg("rect", { x, y: y(b.delivered), width: slot - 4, height: y(0) - y(b.delivered), class: "delivered" }),
      svg("rect", { x, y: y(b.delivered + b.failed), width: slot - 4, height: y(b.delivered) - y(b.delivered + b.failed),
        fill: "url(#failed-stripes)" }));
    parts.push(bar);
    if (i % 6 === 0) {
      parts.push(svg("text", { x: x + (slot - 4) / 2, y: h - 6, "text-anchor": "middle" }, `${pad(at.getHours())}:00`));
    }
  });
  return svg("svg", { viewBox: `0 0 ${w} ${h}`, class: "stats-chart", role: "img",
    "aria-label": `Attempts per hour over the last 24 hours, at most ${top} in an hour` }, ...parts);
}

function dailyTable(daily) {
  return el("div", { class: "table" }, el("table", { id: "daily" },
    el("thead", {}, el("tr", {}, el("th", {}, "Day (UTC)"), el("th", {}, "Delivered"), el("th", {}, "Failed"),
      el("th", {}, "Delivered share"))),
    el("tbody", {}, daily.slice().reverse().map((b) => {
      const all = b.delivered + b.failed;
      return el("tr", {}, el("td", {}, String(b.start).slice(0, 10)), el("td", {}, String(b.delivered)),
        el("td", {}, String(b.failed)), el("td", {}, all ? percent(b.delivered / all) : "—"));
    }))));
}

// The endpoint page's statistics section.
function statsSection(s) {
  const partial = s.complete ? null
    : el("p", { class: "muted" }, `From the latest ${s.attempts_read} attempts only.`);
  return el("section", { id: "stats" }, el("h2", {}, "Statistics"),
    el("p", {}, summary("Last 24 hours", s.last_24h)),
    el("p", {}, summary("Last 7 days", s.last_7d)), partial,
    hourlyChart(s.hourly),
    el("p", { class: "legend" }, el("span", { class: "key delivered" }), " delivered ",
      el("span", { class: "key failed" }), " failed (striped)"),
    dailyTable(s.daily));
}
