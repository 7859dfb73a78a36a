// The tenant portal: one page over the tenant's own API routes, carried by
// a portal session. The session arrives in the URL fragment (never sent to
// a server or in Referer), is kept in sessionStorage for this tab, and is
// sent as a bearer token. Everything shown is set as text (textContent),
// never parsed as HTML: receivers' responses and publishers' data are
// untrusted.
"use strict";

const KEY = "hooklane.session";
const state = { token: null, tenant: null, readOnly: true, expires: 0, stopped: false };

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// Every time the portal shows is the browser's local time, written one
// way (2026-12-07 19:14:46 GMT+1), and every time it takes is written the
// same way, without the seconds and the zone.
function pad(n) {
  return String(n).padStart(2, "0");
}

function zoneName(d) {
  const part = new Intl.DateTimeFormat("en", { timeZoneName: "short" }).formatToParts(d)
    .find((x) => x.type === "timeZoneName");
  return part ? part.value : "";
}

function when(t) {
  const d = t ? new Date(t) : null;
  if (!d || isNaN(d)) return "—";
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneName(d)}`.trim();
}

// A local time as a time field shows it (YYYY-MM-DD HH:MM).
function field(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

// A time field's value as a Date; throws naming the field when it does not
// read as YYYY-MM-DD HH:MM.
function parseField(value, name) {
  const m = /^\s*(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}))?\s*$/.exec(value);
  const d = m ? new Date(+m[1], m[2] - 1, +m[3], +(m[4] || 0), +(m[5] || 0)) : null;
  if (!d || isNaN(d) || d.getMonth() !== m[2] - 1) throw new Error(`${name}: write a time as YYYY-MM-DD HH:MM (your local time, ${zoneName(new Date())}).`);
  return d;
}

function timeInput(id, value) {
  return el("input", { id, name: id, inputmode: "numeric", placeholder: "YYYY-MM-DD HH:MM", value: value || "", autocomplete: "off" });
}

// The notice stays in view at the top of the window (sticky), wherever
// the control that brought it is.
function notice(text, error) {
  const n = document.getElementById("notice");
  n.textContent = text || "";
  n.className = error ? "error" : "";
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
}

// The tenant's endpoints by id, read once per page drawn (pages name
// endpoints by URL; one deleted since shows its id).
async function endpointsById() {
  const page = await api("GET", "/subscriptions?limit=250");
  return new Map(page.items.map((s) => [s.id, s]));
}

function endpointLink(subs, id) {
  const sub = subs.get(id);
  return el("a", { href: `#/endpoints/${encodeURIComponent(id)}`, class: "url" }, sub ? sub.url : id);
}

// A delivery's state as the tenant sees it: one still pending at a
// suspended endpoint waits for it to be re-enabled (held), not a retry.
function deliveryState(d, subs) {
  const sub = subs.get(d.subscription_id);
  return d.state === "pending" && sub && sub.status === "suspended" ? "held (endpoint suspended)" : d.state;
}

function b64json(part) {
  const b64 = part.replace(/-/g, "+").replace(/_/g, "/");
  return JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)));
}

// ---------------------------------------------------------------- session

function startSession() {
  const fromLink = new URLSearchParams(location.hash.slice(1)).get("session");
  if (fromLink) {
    sessionStorage.setItem(KEY, fromLink);
    history.replaceState(null, "", location.pathname + location.search + "#/endpoints");
  }
  const token = sessionStorage.getItem(KEY);
  if (!token || !token.startsWith("hlp_")) return false;
  try {
    const claims = b64json(token.slice(4).split(".")[0]);
    Object.assign(state, { token, tenant: claims.t, readOnly: !!claims.ro, expires: claims.exp * 1000 });
  } catch (_) {
    return false;
  }
  document.getElementById("who").textContent =
    `${state.tenant}${state.readOnly ? " · read-only" : ""} · session until ${when(state.expires)}`;
  return true;
}

function stop(text) {
  state.stopped = true;
  sessionStorage.removeItem(KEY);
  document.querySelector("header nav").replaceChildren();
  show(el("h1", {}, "Session ended"), el("p", {}, text, " Ask for a new portal link."));
  notice(text, true);
}

function expired() {
  if (!state.stopped && Date.now() >= state.expires) stop("This session has expired.");
  return state.stopped;
}

async function api(method, path, body) {
  if (expired()) throw new Error("session expired");
  // The tenant routes for tenant credentials only (on AWS, the ones the
  // gateway passes to the function unchecked).
  const res = await fetch(`/portal/api/v1/tenants/${encodeURIComponent(state.tenant)}${path}`, {
    method,
    headers: Object.assign({ authorization: `Bearer ${state.token}` }, body ? { "content-type": "application/json" } : {}),
    body: body ? JSON.stringify(body) : undefined,
    referrerPolicy: "no-referrer",
  });
  if (res.status === 401) {
    stop("This session has expired or was revoked.");
    throw new Error("session ended");
  }
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error((data && (data.detail || data.title)) || `HTTP ${res.status}`);
  return data;
}

// Runs an action, showing its error (or `done`) in the notice; the page
// is drawn again after it unless `stay`.
async function act(work, done, stay) {
  try {
    await work();
    if (!stay) await route();
    if (done) notice(done);
  } catch (e) {
    if (!state.stopped) notice(e.message, true);
  }
}

function writable(...nodes) {
  return state.readOnly ? [] : nodes;
}

// ---------------------------------------------------------------- endpoints

function statusCell(sub) {
  return el("span", { class: `status-${sub.status}` }, sub.status);
}

function health(sub) {
  const h = sub.health || {};
  if (!h.last_outcome) return "no attempts yet";
  const failing = h.consecutive_failures ? `, ${h.consecutive_failures} failing in a row` : "";
  return `${h.last_outcome}${h.last_status_code ? ` (${h.last_status_code})` : ""}${failing}`;
}

function endpointFields(sub) {
  return [
    el("label", { for: "url" }, "URL"),
    el("input", { id: "url", name: "url", type: "url", required: true, value: sub ? sub.url : "" }),
    el("label", { for: "types" }, "Event types (comma-separated: invoice.paid, invoice.*, *)"),
    el("input", { id: "types", name: "types", required: true, value: sub ? sub.event_types.join(", ") : "*" }),
    el("label", { for: "description" }, "Description"),
    el("input", { id: "description", name: "description", value: (sub && sub.description) || "" }),
    el("div", { class: "row" },
      el("div", {}, el("label", { for: "lanes" }, "Lanes"),
        el("input", { id: "lanes", name: "lanes", type: "number", min: 1, max: 256, value: sub ? sub.lanes : 1 })),
      el("div", {}, el("label", { for: "rate" }, "Rate limit (per second, empty: none)"),
        el("input", { id: "rate", name: "rate", type: "number", min: 1, max: 10000, value: (sub && sub.rate_limit) || "" }))),
    ...optionFields(sub),
  ];
}

function endpointBody(form) {
  const f = new FormData(form);
  const rate = String(f.get("rate") || "").trim();
  return {
    url: String(f.get("url")).trim(),
    event_types: String(f.get("types")).split(",").map((s) => s.trim()).filter(Boolean),
    description: String(f.get("description") || "").trim() || null,
    lanes: Number(f.get("lanes") || 1),
    rate_limit: rate ? Number(rate) : null,
  };
}

async function endpointsPage() {
  const page = await api("GET", "/subscriptions?limit=250");
  const rows = page.items.map((s) =>
    el("tr", {},
      el("td", {}, el("a", { href: `#/endpoints/${encodeURIComponent(s.id)}`, class: "url" }, s.url)),
      el("td", {}, statusCell(s)),
      el("td", { class: "wide" }, String(s.lanes)),
      el("td", { class: "wide" }, s.rate_limit ? `${s.rate_limit}/s` : "—"),
      el("td", {}, health(s))));
  const create = el("form", { class: "card", id: "create-endpoint" },
    el("h2", {}, "Add an endpoint"), ...endpointFields(null), el("button", { type: "submit" }, "Add endpoint"));
  create.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(() => {
      const body = optionsBody(create, endpointBody(create), null);
      if (!body.description) delete body.description;
      return api("POST", "/subscriptions", body);
    }, "Endpoint added.");
  });
  show(el("h1", {}, "Endpoints"),
    el("div", { class: "table" }, el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "URL"), el("th", {}, "Status"), el("th", { class: "wide" }, "Lanes"),
        el("th", { class: "wide" }, "Rate limit"), el("th", {}, "Health"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 5 }, "No endpoints yet."))))),
    ...writable(create));
}

function chart(attempts) {
  const bars = attempts.slice().reverse().map((a) =>
    el("span", { class: a.outcome === "delivered" ? "ok" : "bad", title: `${when(a.started_at)}: ${a.outcome}` }));
  const ok = attempts.filter((a) => a.outcome === "delivered").length;
  return [el("p", { class: "muted" }, `Last ${attempts.length} attempts: ${ok} delivered, ${attempts.length - ok} failed.`),
    el("div", { class: "chart", role: "img", "aria-label": `${ok} delivered, ${attempts.length - ok} failed` }, bars)];
}

function attemptRows(items) {
  return items.map((a) => el("tr", {},
    el("td", {}, when(a.started_at)),
    el("td", {}, a.event_id.startsWith("evt_")
      ? el("a", { href: `#/events/${encodeURIComponent(a.event_id)}` }, a.event_type || a.event_id)
      : el("span", { class: "muted" }, "endpoint.probe (re-enable's test request)")),
    el("td", {}, String(a.attempt)),
    el("td", { class: a.outcome === "delivered" || a.outcome === "probe_succeeded" ? "ok" : "bad" }, `${a.outcome}${a.status_code ? ` ${a.status_code}` : ""}`),
    el("td", { class: "wide" }, `${a.duration_ms} ms`),
    el("td", { class: "wide" }, el("code", {}, a.response_excerpt || a.error || ""))));
}

function attemptLog(id, first) {
  const body = el("tbody", {}, attemptRows(first.items));
  const more = el("button", { class: "plain", type: "button" }, "Older attempts");
  let cursor = first.next_cursor;
  more.hidden = !cursor;
  more.addEventListener("click", () => act(async () => {
    const page = await api("GET", `/subscriptions/${id}/attempts?limit=50&cursor=${encodeURIComponent(cursor)}`);
    body.append(...attemptRows(page.items));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }, null, true));
  return [el("div", { class: "table" }, el("table", { id: "attempts" },
    el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Event"), el("th", {}, "Attempt"), el("th", {}, "Status"),
      el("th", { class: "wide" }, "Duration"), el("th", { class: "wide" }, "Response"))), body)), more];
}

function endpointActions(sub, id) {
  const secret = el("code", { class: "secret", id: "secret" }, "hidden");
  const edit = el("form", { class: "card", id: "edit-endpoint" }, el("h2", {}, "Edit"), ...endpointFields(sub),
    el("button", { type: "submit" }, "Save"));
  edit.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(() => {
      const body = optionsBody(edit, endpointBody(edit), sub);
      if (!body.description) delete body.description;
      return api("PATCH", `/subscriptions/${id}`, body);
    }, "Saved.");
  });
  const remove = () => {
    if (confirm(`Delete the endpoint ${sub.url}? Nothing more is sent to it.`)) {
      act(async () => { await api("DELETE", `/subscriptions/${id}`); location.hash = "#/endpoints"; }, "Endpoint deleted.");
    }
  };
  return [el("section", {}, el("h2", {}, "Signing secret"), secret, el("br"),
    el("button", { type: "button", class: "plain", onclick: () => act(async () => {
      secret.textContent = (await api("GET", `/subscriptions/${id}/secret`)).secret;
    }, null, true) }, "Reveal"),
    el("button", { type: "button", onclick: () => act(async () => {
      secret.textContent = (await api("POST", `/subscriptions/${id}/rotate-secret`)).secret;
    }, "Secret rotated: the previous one keeps signing for 24 hours.", true) }, "Rotate")),
  edit, el("button", { type: "button", class: "danger", onclick: remove }, "Delete endpoint")];
}

function suspended(sub, id) {
  if (sub.status !== "suspended") return [];
  const enable = el("button", { type: "button", onclick: () => act(async () => {
    await api("POST", `/subscriptions/${id}/enable`);
  }, "The test request succeeded: the endpoint is active again and missed events are being sent.") }, "Re-enable");
  return [el("section", { id: "suspended" }, el("h2", {}, "Suspended"),
    el("p", {}, `Since ${when(sub.suspended_at)}: `, sub.status_reason || "repeated failures"),
    el("p", { class: "muted" }, "Re-enabling first sends a test request; the endpoint stays suspended if it fails."),
    ...writable(enable))];
}

async function endpointPage(id) {
  const sub = await api("GET", `/subscriptions/${id}`);
  const attempts = await api("GET", `/subscriptions/${id}/attempts?limit=50`);
  const h = sub.health || {};
  show(el("p", {}, el("a", { href: "#/endpoints" }, "← Endpoints")),
    el("h1", {}, sub.url),
    el("section", {},
      el("p", {}, "Status: ", statusCell(sub), ` · lanes ${sub.lanes} · `, sub.rate_limit ? `${sub.rate_limit}/s` : "no rate limit"),
      el("p", {}, "Event types: ", sub.event_types.join(", ")),
      sub.description ? el("p", {}, sub.description) : null,
      ...optionsView(sub),
      el("p", {}, "Health: ", health(sub), h.last_error ? ` · last error: ${h.last_error}` : "")),
    ...suspended(sub, id),
    ...writable(...endpointTools(sub, id)),
    el("h2", {}, "Recent attempts"), ...chart(attempts.items), ...attemptLog(id, attempts),
    ...writable(...endpointActions(sub, id)));
}

// ---------------------------------------------------------------- events and dead letters

// Event types are matched exactly here (the API's `type` filter): the
// field offers the exact types the tenant's endpoints name.
async function eventsPage(query) {
  const params = new URLSearchParams(query);
  const since = params.get("since");
  const form = el("form", { class: "card row", id: "event-filter" },
    el("div", {}, el("label", { for: "type" }, "Type (exact, e.g. invoice.paid)"),
      el("input", { id: "type", name: "type", list: "known-types", value: params.get("type") || "" }),
      el("datalist", { id: "known-types" }, [...await knownTypes()].map((t) => el("option", { value: t })))),
    el("div", {}, el("label", { for: "since" }, `Since (${zoneName(new Date())})`), timeInput("since", since ? field(new Date(since)) : "")),
    el("div", {}, el("button", { type: "submit" }, "Filter")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const next = new URLSearchParams();
    const type = String(f.get("type") || "").trim();
    try {
      if (type.includes("*")) throw new Error(`Type: "${type}" is a pattern; events are searched by one exact type, such as ${type.replace(/\*.*$/, "") || "invoice."}paid.`);
      if (type) next.set("type", type);
      if (f.get("since")) next.set("since", parseField(String(f.get("since")), "Since").toISOString());
    } catch (e) {
      notice(e.message, true);
      return;
    }
    location.hash = `#/events?${next}`;
  });
  let page = { items: [], next_cursor: null };
  try {
    page = await api("GET", `/events?${params}`);
  } catch (e) {
    if (state.stopped) return;
    notice(`The events could not be listed: ${e.message}`, true);
  }
  const rows = page.items.map((e) => el("tr", {},
    el("td", {}, when(e.created_at)), el("td", {}, e.type),
    el("td", {}, el("a", { href: `#/events/${encodeURIComponent(e.id)}`, class: "id" }, e.id))));
  const next = page.next_cursor ? (() => { params.set("cursor", page.next_cursor); return el("a", { href: `#/events?${params}` }, "Older events"); })() : null;
  show(el("h1", {}, "Events"), form, el("div", { class: "table" }, el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Type"), el("th", {}, "Id"))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 3 }, "No events."))))), next);
}

// The exact event types the tenant's endpoints name (patterns left out).
async function knownTypes() {
  const page = await api("GET", "/subscriptions?limit=250");
  return new Set(page.items.flatMap((s) => s.event_types).filter((t) => !t.includes("*")).sort());
}

async function eventPage(id) {
  const e = await api("GET", `/events/${encodeURIComponent(id)}`);
  const subs = await endpointsById();
  const rows = e.deliveries.map((d) => el("tr", {},
    el("td", {}, endpointLink(subs, d.subscription_id)),
    el("td", {}, deliveryState(d, subs)), el("td", {}, String(d.attempts)), el("td", {}, d.last_status_code ? String(d.last_status_code) : "—")));
  show(el("p", {}, el("a", { href: "#/events" }, "← Events")), el("h1", {}, e.type),
    el("p", { class: "muted" }, `${e.id} · ${when(e.created_at)}`),
    el("h2", {}, "Payload"), el("pre", { id: "payload" }, JSON.stringify(e.data, null, 2)),
    el("h2", {}, "Deliveries"), el("div", { class: "table" }, el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Endpoint"), el("th", {}, "State"), el("th", {}, "Attempts"), el("th", {}, "Last status"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 4 }, "No deliveries."))))));
}

async function deadLettersPage() {
  const page = await api("GET", "/dead-letters?limit=250");
  const subs = await endpointsById();
  const replay = (body, what) => act(() => api("POST", "/dead-letters/replay", body), `${what} replayed.`);
  // At phone width the time goes under the event and the reason and
  // count are left out, so that the replay buttons stay in view.
  const rows = page.items.map((d) => el("tr", {},
    el("td", { class: "wide" }, when(d.parked_at)),
    el("td", {}, el("a", { href: `#/events/${encodeURIComponent(d.event_id)}` }, d.event_type),
      el("div", { class: "narrow muted" }, when(d.parked_at))),
    el("td", {}, endpointLink(subs, d.subscription_id)),
    el("td", { class: "wide" }, d.reason), el("td", { class: "wide" }, String(d.attempts)),
    el("td", { class: "actions" }, ...writable(
      el("button", { type: "button", onclick: () => replay({ subscription_id: d.subscription_id, event_ids: [d.event_id] }, "Delivery") }, "Replay"),
      el("button", { type: "button", class: "plain", "aria-label": "Replay all of the endpoint's dead letters",
        onclick: () => replay({ subscription_id: d.subscription_id }, "Every dead letter of the endpoint") }, "Replay all")))));
  show(el("h1", {}, "Dead letters"), el("p", { class: "muted" }, "Deliveries that ran out of retries."),
    el("div", { class: "table" }, el("table", { id: "dead-letters" },
      el("thead", {}, el("tr", {}, el("th", { class: "wide" }, "Parked"), el("th", {}, "Event"), el("th", {}, "Endpoint"),
        el("th", { class: "wide" }, "Why"), el("th", { class: "wide" }, "Attempts"), el("th", {}, ""))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 6 }, "No dead letters."))))));
}

// ---------------------------------------------------------------- router

async function route() {
  if (expired()) return;
  const [path, query] = location.hash.slice(1).split("?");
  try {
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "endpoints" && parts[1]) await endpointPage(encodeURIComponent(parts[1]));
    else if (parts[0] === "events" && parts[1]) await eventPage(parts[1]);
    else if (parts[0] === "events") await eventsPage(query || "");
    else if (parts[0] === "dead-letters") await deadLettersPage();
    else await endpointsPage();
    document.getElementById("main").focus({ preventScroll: true });
  } catch (e) {
    if (!state.stopped) show(el("h1", {}, "Something went wrong"), el("p", {}, e.message));
  }
  // Which address the page on screen was drawn for (what a test waits on).
  document.getElementById("main").dataset.drawn = location.hash;
}

window.addEventListener("DOMContentLoaded", () => {
  if (!startSession()) {
    stop("No portal session: open the portal with the link your platform gave you.");
    return;
  }
  window.addEventListener("hashchange", () => { notice(""); route(); });
  setInterval(expired, 5000);
  route();
});
