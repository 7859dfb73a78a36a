// The tenant portal's attempt page (loaded before portal.js): one attempt
// in detail from GET …/subscriptions/{id}/attempts/{attempt_id}: the
// request as hooklane sends it and the receiver's response, every value
// set as text.
"use strict";

function headerTable(id, headers, none) {
  const rows = Object.entries(headers || {}).map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, el("code", {}, v))));
  return el("div", { class: "table" }, el("table", { id, class: "headers" },
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", {}, none)))));
}

async function attemptPage(subId, attemptId) {
  const sub = encodeURIComponent(subId);
  const a = await api("GET", `/subscriptions/${sub}/attempts/${encodeURIComponent(attemptId)}`);
  const ok = a.outcome === "delivered" || a.outcome === "probe_succeeded";
  const probe = String(a.outcome).startsWith("probe_");
  const body = a.request.body !== null ? el("pre", { id: "request-body" }, a.request.body)
    : el("p", { class: "muted" }, probe ? "A re-enable probe's body is not kept." : "No longer in the archive (events are kept 14 days).");
  return [el("p", {}, el("a", { href: `#/endpoints/${sub}` }, "← Endpoint")),
    el("h1", {}, `Attempt ${a.attempt} of ${a.event_type || a.event_id}`),
    el("section", {},
      el("p", {}, "Outcome: ", el("span", { class: ok ? "ok" : "bad" }, `${a.outcome}${a.status_code ? ` ${a.status_code}` : ""}`),
        ` · started ${when(a.started_at)} · took ${a.duration_ms} ms`),
      a.error ? el("p", {}, "Error: ", el("code", {}, a.error)) : null,
      probe ? null
        : el("p", {}, "Event: ", el("a", { href: `#/events/${encodeURIComponent(a.event_id)}`, class: "id" }, a.event_id))),
    el("h2", {}, "Request"),
    el("p", {}, el("code", {}, `${a.request.method} ${a.request.url}`)),
    el("p", { class: "muted" }, "The signature is not kept; the endpoint's own headers are shown as they are now."),
    headerTable("request-headers", a.request.headers, "None."), body,
    el("h2", {}, "Response"),
    a.status_code ? el("p", {}, `Status ${a.status_code}`) : el("p", { class: "muted" }, "No response."),
    headerTable("response-headers", a.response_headers, "Headers are kept for failed attempts only."),
    a.response_excerpt ? el("pre", { id: "response-body" }, a.response_excerpt) : null];
}
