// The tenant portal: one page over the tenant's own API routes, carried by
// a portal session. The session arrives in the URL fragment (never sent to
// a server or in Referer), is kept in sessionStorage for this tab, and is
// sent as a bearer token. Everything shown is set as text (textContent),
// never parsed as HTML: receivers' responses and publishers' data are
// untrusted.
"use strict";

const KEY = "hooklane.session";
const state = { token: null, tenant: null, readOnly: true, expires: 0, stopped: false, created: null, told: null };

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

// The notice stays in view at the top of the window (sticky), wherever
// the control that brought it is.
function notice(text, error) {
  const n = document.getElementById("notice");
  n.textContent = text || "";
  n.className = error ? "error" : "";
}

// Goes to another page, with a notice that outlives the address's change.
function go(hash, told) {
  state.told = told;
  location.hash = hash;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat().filter((n) => n !== null && n !== undefined && n !== false));
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

// The fields of an endpoint, with the catalog's `types` to pick from.
function endpointFields(sub, types) {
  const typesInput = el("input", { id: "types", name: "types", required: true, value: sub ? sub.event_types.join(", ") : "*" });
  return [
    el("label", { for: "url" }, "URL"),
    el("input", { id: "url", name: "url", type: "url", required: true, value: sub ? sub.url : "" }),
    el("label", { for: "types" }, "Event types (comma-separated: invoice.paid, invoice.*, *)"),
    typesInput, typePicker(typesInput, types),
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

const ENDPOINTS = "/subscriptions?limit=50";

function endpointRows(items) {
  return items.map((s) =>
    el("tr", {},
      el("td", {}, el("a", { href: `#/endpoints/${encodeURIComponent(s.id)}`, class: "url" }, s.url)),
      el("td", {}, statusCell(s)),
      el("td", { class: "wide" }, String(s.lanes)),
      el("td", { class: "wide" }, s.rate_limit ? `${s.rate_limit}/s` : "—"),
      el("td", {}, health(s))));
}

async function endpointsPage() {
  const [body, more] = paged(await api("GET", ENDPOINTS), ENDPOINTS, endpointRows, "More endpoints",
    el("tr", {}, el("td", { colspan: 5 }, "No endpoints yet.")));
  return [el("div", { class: "title" }, el("h1", {}, "Endpoints"),
    ...writable(el("a", { href: "#/endpoints/new", class: "button", id: "add-endpoint" }, "Add endpoint"))),
    el("div", { class: "table" }, el("table", { id: "endpoints" },
      el("thead", {}, el("tr", {}, el("th", {}, "URL"), el("th", {}, "Status"), el("th", { class: "wide" }, "Lanes"),
        el("th", { class: "wide" }, "Rate limit"), el("th", {}, "Health"))), body)), more];
}

// The add form is a page of its own: the list stays a list. The new
// endpoint's page then shows its signing secret, once.
async function newEndpointPage() {
  const create = el("form", { class: "card", id: "create-endpoint" },
    ...endpointFields(null, await catalog().catch(() => [])), el("button", { type: "submit" }, "Add endpoint"));
  create.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(async () => {
      const body = optionsBody(create, endpointBody(create), null);
      if (!body.description) delete body.description;
      const created = await api("POST", "/subscriptions", body);
      state.created = created;
      go(`#/endpoints/${encodeURIComponent(created.id)}`, "Endpoint added.");
    }, null, true);
  });
  return [el("p", {}, el("a", { href: "#/endpoints" }, "← Endpoints")), el("h1", {}, "Add an endpoint"), create];
}

// The secret of the endpoint just added, shown on its page this once.
function newSecret(id) {
  const created = state.created;
  state.created = null;
  if (!created || created.id !== decodeURIComponent(id)) return [];
  return [el("section", { id: "new-secret", class: "callout" }, el("h2", {}, "Signing secret"),
    el("p", {}, "Copy it now: your receiver checks each request's signature with it. ",
      "It is not shown again here; Reveal, below, shows it to whoever may change this endpoint."),
    el("code", { class: "secret" }, created.secret))];
}

// The rows of `id`'s attempts, each time linking to the attempt's page.
const attemptRows = (id) => (items) => items.map((a) => el("tr", {},
    el("td", {}, el("a", { href: `#/endpoints/${id}/attempts/${encodeURIComponent(a.id)}` }, when(a.started_at))),
    el("td", {}, String(a.outcome).startsWith("probe_")
      ? el("span", { class: "muted" }, "endpoint.probe (re-enable's test request)")
      : el("a", { href: `#/events/${encodeURIComponent(a.event_id)}` }, a.event_type || a.event_id)),
    el("td", {}, String(a.attempt)),
    el("td", { class: a.outcome === "delivered" || a.outcome === "probe_succeeded" ? "ok" : "bad" }, `${a.outcome}${a.status_code ? ` ${a.status_code}` : ""}`),
    el("td", { class: "wide" }, `${a.duration_ms} ms`),
    el("td", { class: "wide" }, el("code", {}, a.response_excerpt || a.error || ""))));

// A table's body that grows a page at a time, and its button: `first` is
// the first page of `path` (which has its limit), `rows` draws items.
function paged(first, path, rows, label, empty) {
  const body = el("tbody", {}, first.items.length ? rows(first.items) : empty);
  const more = el("button", { class: "plain more", type: "button" }, label);
  let cursor = first.next_cursor;
  more.hidden = !cursor;
  more.addEventListener("click", () => act(async () => {
    more.disabled = true;
    try {
      const page = await api("GET", `${path}&cursor=${encodeURIComponent(cursor)}`);
      body.append(...rows(page.items));
      cursor = page.next_cursor;
      more.hidden = !cursor;
    } finally {
      more.disabled = false;
    }
  }, null, true));
  return [body, more];
}

// The attempt log, with a choice of outcome that reads it again.
function attemptLog(id, first) {
  const table = (page, path) => {
    const [body, more] = paged(page, path, attemptRows(id), "Older attempts", null);
    return [el("div", { class: "table" }, el("table", { id: "attempts" },
      el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Event"), el("th", {}, "Attempt"), el("th", {}, "Status"),
        el("th", { class: "wide" }, "Duration"), el("th", { class: "wide" }, "Response"))), body)), more];
  };
  const base = `/subscriptions/${id}/attempts?limit=50`;
  const log = el("div", { id: "attempt-log" }, table(first, base));
  const outcome = el("select", { id: "attempt-outcome", "aria-label": "Which attempts" },
    el("option", { value: "" }, "All attempts"), el("option", { value: "failed" }, "Failed only"),
    el("option", { value: "delivered" }, "Delivered only"));
  outcome.addEventListener("change", () => act(async () => {
    const path = outcome.value ? `${base}&outcome=${outcome.value}` : base;
    log.replaceChildren(...table(await api("GET", path), path));
  }, null, true));
  return [el("div", { class: "row filter" }, el("div", {}, outcome)), log];
}

function endpointActions(sub, id, types) {
  const secret = el("code", { class: "secret", id: "secret" }, "hidden");
  const edit = el("form", { class: "card", id: "edit-endpoint" }, el("h2", {}, "Edit"), ...endpointFields(sub, types),
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
      act(async () => { await api("DELETE", `/subscriptions/${id}`); go("#/endpoints", "Endpoint deleted."); }, null, true);
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
  const [attempts, stats, types] = await Promise.all([api("GET", `/subscriptions/${id}/attempts?limit=50`),
    api("GET", `/subscriptions/${id}/stats`), state.readOnly ? [] : catalog().catch(() => [])]);
  const h = sub.health || {};
  return [el("p", {}, el("a", { href: "#/endpoints" }, "← Endpoints")),
    el("h1", {}, sub.url),
    ...newSecret(id),
    el("section", {},
      el("p", {}, "Status: ", statusCell(sub), ` · lanes ${sub.lanes} · `, sub.rate_limit ? `${sub.rate_limit}/s` : "no rate limit"),
      el("p", {}, "Event types: ", sub.event_types.join(", ")),
      sub.description ? el("p", {}, sub.description) : null,
      ...optionsView(sub),
      el("p", {}, "Health: ", health(sub), h.last_error ? ` · last error: ${h.last_error}` : "")),
    ...suspended(sub, id),
    ...writable(...endpointTools(sub, id, types)),
    statsSection(stats),
    el("h2", {}, "Recent attempts"), ...attemptLog(id, attempts),
    ...writable(...endpointActions(sub, id, types))];
}

// ---------------------------------------------------------------- router

// Draws the page of the address: each page answers its nodes, drawn only
// if the address is still the one asked for (a later route draws its own),
// and marked with the address it was drawn for (what a test waits on).
async function route() {
  if (expired()) return;
  const at = location.hash;
  const [path, query] = at.slice(1).split("?");
  let nodes;
  try {
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (parts[0] === "endpoints" && parts[1] === "new" && !state.readOnly) nodes = await newEndpointPage();
    else if (parts[0] === "event-types") nodes = await eventTypesPage();
    else if (parts[0] === "endpoints" && parts[2] === "attempts" && parts[3]) nodes = await attemptPage(parts[1], parts[3]);
    else if (parts[0] === "endpoints" && parts[1]) nodes = await endpointPage(encodeURIComponent(parts[1]));
    else if (parts[0] === "events" && parts[1]) nodes = await eventPage(parts[1]);
    else if (parts[0] === "events") nodes = await eventsPage(query || "");
    else if (parts[0] === "dead-letters") nodes = await deadLettersPage();
    else nodes = await endpointsPage();
  } catch (e) {
    nodes = [el("h1", {}, "Something went wrong"), el("p", {}, e.message)];
  }
  if (state.stopped || location.hash !== at || !nodes) return;
  show(...nodes);
  const main = document.getElementById("main");
  main.focus({ preventScroll: true });
  main.dataset.drawn = at;
}

// The looks the portal link asked for (`?theme=light|dark|auto`,
// `&brand=rrggbb`, `&compact=1`), set as the stylesheet's custom
// properties and attributes on the root: no inline style or script.
function applyLooks() {
  const q = new URLSearchParams(location.search);
  const root = document.documentElement;
  const theme = q.get("theme");
  const system = matchMedia("(prefers-color-scheme: dark)");
  const set = () => { root.dataset.theme = theme === "dark" || (theme === "auto" && system.matches) ? "dark" : "light"; };
  set();
  if (theme === "auto") system.addEventListener("change", set);
  const brand = q.get("brand") || "";
  if (/^[0-9a-f]{6}$/i.test(brand)) {
    const [r, g, b] = [0, 2, 4].map((i) => parseInt(brand.slice(i, i + 2), 16) / 255);
    root.style.setProperty("--brand", `#${brand}`);
    root.style.setProperty("--on-brand", 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.55 ? "#10131a" : "#ffffff");
  }
  if (q.get("compact") === "1") root.dataset.compact = "true";
}

window.addEventListener("DOMContentLoaded", () => {
  applyLooks();
  if (!startSession()) {
    stop("No portal session: open the portal with the link your platform gave you.");
    return;
  }
  window.addEventListener("hashchange", () => { notice(state.told || ""); state.told = null; route(); });
  setInterval(expired, 5000);
  route();
});
