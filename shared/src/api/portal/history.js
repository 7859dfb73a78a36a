// The tenant portal's history pages: events (by exact type and time),
// one event with its deliveries, and the dead letters with replay. Loaded
// before portal.js, whose router calls them; they use its helpers (el,
// api, act, show, notice, writable) once the page has loaded.
"use strict";

// The tenant's endpoints by id, read once per page drawn (pages name
// endpoints by URL; one deleted since shows its id).
// Every endpoint by id (up to 2,500, ten pages), to name them by URL.
async function endpointsById() {
  const subs = new Map();
  let cursor = null;
  for (let i = 0; i < 10; i++) {
    const page = await api("GET", `/subscriptions?limit=250${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    page.items.forEach((s) => subs.set(s.id, s));
    cursor = page.next_cursor;
    if (!cursor) break;
  }
  return subs;
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

// Event types are matched exactly here (the API's `type` filter): the
// field offers the exact types the tenant's endpoints name.
async function eventsPage(query) {
  const params = new URLSearchParams(query);
  const [since, until] = [params.get("since"), params.get("until")];
  const form = el("form", { class: "card row", id: "event-filter" },
    el("div", {}, el("label", { for: "type" }, "Type (exact, e.g. invoice.paid)"),
      el("input", { id: "type", name: "type", list: "known-types", value: params.get("type") || "" }),
      el("datalist", { id: "known-types" }, [...await knownTypes().catch(() => [])].map((t) => el("option", { value: t })))),
    el("div", {}, el("label", { for: "since" }, `Since (${zoneName(new Date())})`), timeInput("since", since ? field(new Date(since)) : "")),
    el("div", {}, el("label", { for: "until" }, `Until (${zoneName(new Date())})`), timeInput("until", until ? field(new Date(until)) : "")),
    el("div", {}, el("label", { for: "event-id" }, "Or an event id"), el("input", { id: "event-id", name: "id", placeholder: "evt_…" })),
    el("div", {}, el("button", { type: "submit" }, "Filter")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const next = new URLSearchParams();
    const type = String(f.get("type") || "").trim();
    const id = String(f.get("id") || "").trim();
    if (id) {
      location.hash = `#/events/${encodeURIComponent(id)}`;
      return;
    }
    try {
      if (type.includes("*")) throw new Error(`Type: "${type}" is a pattern; events are searched by one exact type, such as ${type.replace(/\*.*$/, "") || "invoice."}paid.`);
      if (type) next.set("type", type);
      if (f.get("since")) next.set("since", parseField(String(f.get("since")), "Since").toISOString());
      if (f.get("until")) next.set("until", parseField(String(f.get("until")), "Until").toISOString());
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
  return [el("h1", {}, "Events"), form, el("div", { class: "table" }, el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "Time"), el("th", {}, "Type"), el("th", {}, "Id"))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 3 }, "No events."))))), next];
}

// The exact event types of the tenant's catalog.
async function knownTypes() {
  return (await catalog()).map((t) => t.name);
}

async function eventPage(id) {
  const e = await api("GET", `/events/${encodeURIComponent(id)}`);
  const subs = await endpointsById();
  const rows = e.deliveries.map((d) => el("tr", {},
    el("td", {}, endpointLink(subs, d.subscription_id)),
    el("td", {}, deliveryState(d, subs)), el("td", {}, String(d.attempts)), el("td", {}, d.last_status_code ? String(d.last_status_code) : "—")));
  return [el("p", {}, el("a", { href: "#/events" }, "← Events")), el("h1", {}, e.type),
    el("p", { class: "muted" }, `${e.id} · ${when(e.created_at)}`),
    el("h2", {}, "Payload"), el("pre", { id: "payload" }, JSON.stringify(e.data, null, 2)),
    el("h2", {}, "Deliveries"), el("div", { class: "table" }, el("table", {},
      el("thead", {}, el("tr", {}, el("th", {}, "Endpoint"), el("th", {}, "State"), el("th", {}, "Attempts"), el("th", {}, "Last status"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 4 }, "No deliveries.")))))];
}

const DEAD_LETTERS = "/dead-letters?limit=50";

async function deadLettersPage() {
  const [first, subs] = await Promise.all([api("GET", DEAD_LETTERS), endpointsById()]);
  const replay = (body, what) => act(() => api("POST", "/dead-letters/replay", body), `${what} replayed.`);
  // At phone width the time goes under the event and the reason and
  // count are left out, so that the replay buttons stay in view.
  const rows = (items) => items.map((d) => el("tr", {},
    el("td", { class: "wide" }, when(d.parked_at)),
    el("td", {}, el("a", { href: `#/events/${encodeURIComponent(d.event_id)}` }, d.event_type),
      el("div", { class: "narrow muted" }, when(d.parked_at))),
    el("td", {}, endpointLink(subs, d.subscription_id)),
    el("td", { class: "wide" }, d.reason), el("td", { class: "wide" }, String(d.attempts)),
    el("td", { class: "actions" }, ...writable(
      el("button", { type: "button", onclick: () => replay({ subscription_id: d.subscription_id, event_ids: [d.event_id] }, "Delivery") }, "Replay"),
      el("button", { type: "button", class: "plain", "aria-label": "Replay all of the endpoint's dead letters",
        onclick: () => replay({ subscription_id: d.subscription_id }, "Every dead letter of the endpoint") }, "Replay all")))));
  const [body, more] = paged(first, DEAD_LETTERS, rows, "More dead letters",
    el("tr", {}, el("td", { colspan: 6 }, "No dead letters.")));
  return [el("h1", {}, "Dead letters"), el("p", { class: "muted" }, "Deliveries that ran out of retries."),
    el("div", { class: "table" }, el("table", { id: "dead-letters" },
      el("thead", {}, el("tr", {}, el("th", { class: "wide" }, "Parked"), el("th", {}, "Event"), el("th", {}, "Endpoint"),
        el("th", { class: "wide" }, "Why"), el("th", { class: "wide" }, "Attempts"), el("th", {}, ""))), body)), more];
}
