// The tenant portal's endpoint options (loaded before portal.js, whose
// helpers these call when a page is drawn): the content filter, static
// headers and auth in the endpoint forms, shown on the endpoint's page
// without the password or token, and the endpoint tools: send a test
// event, recover what was missed since a time.
"use strict";

// "Name: value" lines to an object of headers; a line without ":" is an
// error the API would not name as clearly.
function parseHeaders(text) {
  const out = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf(":");
    if (at < 1) throw new Error(`Headers: "${line}" is not "Name: value".`);
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function headerLines(headers) {
  return Object.entries(headers || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
}

function optionFields(sub) {
  const auth = (sub && sub.auth) || null;
  const type = auth ? auth.type : "none";
  const option = (value, text) => el("option", { value, selected: type === value }, text);
  return [
    el("label", { for: "filter" }, "Content filter (JSON on the event's type and data; empty: every event of its types)"),
    el("textarea", { id: "filter", name: "filter", rows: 3, spellcheck: "false",
      placeholder: '{"data": {"amount": {"$gte": 1000}}}' },
    filterText(sub)),
    el("label", { for: "headers" }, "Headers (one \"Name: value\" per line)"),
    el("textarea", { id: "headers", name: "headers", rows: 2, spellcheck: "false", placeholder: "X-Api-Key: …" },
      headerLines(sub && sub.headers)),
    el("div", { class: "row" },
      el("div", {}, el("label", { for: "auth-type" }, "Authorization"),
        el("select", { id: "auth-type", name: "auth_type" },
          option("none", "None"), option("basic", "Basic"), option("bearer", "Bearer token"))),
      el("div", {}, el("label", { for: "auth-user" }, "Username (basic)"),
        el("input", { id: "auth-user", name: "auth_user", autocomplete: "off", value: (auth && auth.username) || "" })),
      el("div", {}, el("label", { for: "auth-secret" }, "Password or token"),
        el("input", { id: "auth-secret", name: "auth_secret", type: "password", autocomplete: "new-password",
          placeholder: auth ? "unchanged unless given" : "" }))),
  ];
}

// The filter as the form shows it.
function filterText(sub) {
  return sub && sub.filter ? JSON.stringify(sub.filter) : "";
}

// Adds the options of the form to `body`. The filter goes only when it was
// edited (a read shows a number past a float's precision rounded; sent
// back unedited it would replace the exact one). The auth goes only when
// it changes: a type of none clears it, a password or token sets it whole.
function optionsBody(form, body, sub) {
  const f = new FormData(form);
  const filter = String(f.get("filter") || "").trim();
  if (!sub || filter !== filterText(sub)) {
    try {
      body.filter = filter ? JSON.parse(filter) : null;
    } catch (_) {
      throw new Error("Content filter: this is not JSON.");
    }
  }
  body.headers = parseHeaders(String(f.get("headers") || ""));
  const type = String(f.get("auth_type"));
  const secret = String(f.get("auth_secret") || "");
  const user = String(f.get("auth_user") || "").trim();
  const was = (sub && sub.auth) || null;
  if (type === "none") {
    if (was) body.auth = null;
  } else if (secret) {
    body.auth = type === "basic" ? { type, username: user, password: secret } : { type, token: secret };
  } else if (!was || was.type !== type || (type === "basic" && was.username !== user)) {
    throw new Error("Authorization: give the password or token.");
  }
  return body;
}

function optionsView(sub) {
  const auth = sub.auth ? `${sub.auth.type}${sub.auth.username ? ` (${sub.auth.username})` : ""}` : "none";
  const names = Object.keys(sub.headers || {});
  return [
    el("p", {}, "Authorization: ", auth, " · headers: ", names.length ? names.join(", ") : "none"),
    sub.filter ? el("div", {}, el("p", {}, "Content filter:"), el("pre", { id: "filter-view" }, JSON.stringify(sub.filter, null, 2)))
      : el("p", {}, "Content filter: none"),
  ];
}

// Send a test event (of a type from the catalog, with its example as the
// data to start from) and recover a time window.
function endpointTools(sub, id, types) {
  if (sub.status !== "active") return [];
  const since = timeInput("recover-since", field(new Date(Date.now() - 3600e3)));
  const kind = el("select", { id: "test-type" }, el("option", { value: "webhook.test" }, "webhook.test"),
    (types || []).map((t) => el("option", { value: t.name }, t.name)));
  const data = el("textarea", { id: "test-data", rows: 3, spellcheck: "false" }, "{}");
  kind.addEventListener("change", () => {
    const t = (types || []).find((x) => x.name === kind.value);
    data.value = JSON.stringify(t && t.example !== null && t.example !== undefined ? t.example : {}, null, 2);
  });
  const test = () => act(async () => {
    let body;
    try {
      body = JSON.parse(data.value || "{}");
    } catch (_) {
      throw new Error("Test data: write it as JSON, such as {\"amount\": 4200}.");
    }
    const sent = await api("POST", `/subscriptions/${id}/test`, { event_type: kind.value, data: body });
    notice(`Test event ${sent.event_id} sent.`);
  }, null, true);
  const recover = () => act(async () => {
    const from = parseField(since.value, "Recover since");
    const r = await api("POST", `/subscriptions/${id}/recover`, { since: from.toISOString() });
    notice(`Recovering: ${r.recovering} event(s) since ${when(from)} are looked at; what was not delivered is sent again.`);
  }, null, true);
  return [el("section", { id: "tools" }, el("h2", {}, "Tools"),
    el("div", { class: "row" }, el("div", {}, el("label", { for: "test-type" }, "Test event type"), kind)),
    el("label", { for: "test-data" }, "Test event data (JSON)"), data,
    el("button", { type: "button", id: "send-test", onclick: test }, "Send test event"),
    el("label", { for: "recover-since" }, `Recover what was not delivered since (${zoneName(new Date())})`), since,
    el("button", { type: "button", id: "recover", onclick: recover }, "Recover"))];
}
