// The tenant portal's event-type catalog (loaded before portal.js): the
// "Event types" page, and the picker under an endpoint's event-types
// field, both from GET …/event-types (what the platform registered, what
// endpoints name, what recent events carry).
"use strict";

async function catalog() {
  return (await api("GET", "/event-types")).items;
}

function exampleOf(t) {
  return t.example === null || t.example === undefined ? null
    : el("details", {}, el("summary", {}, "Example data"), el("pre", {}, JSON.stringify(t.example, null, 2)));
}

// Checkboxes of the catalog's types under the comma-separated `input`:
// ticking one adds it to the field, unticking takes it out.
function typePicker(input, types) {
  if (!types.length) return null;
  const chosen = () => input.value.split(",").map((s) => s.trim()).filter(Boolean);
  const boxes = types.map((t) => {
    const box = el("input", { type: "checkbox", value: t.name, id: `pick-${t.name}` });
    box.checked = chosen().includes(t.name);
    box.addEventListener("change", () => {
      const rest = chosen().filter((n) => n !== t.name && n !== "*");
      input.value = (box.checked ? [...rest, t.name] : rest).join(", ");
    });
    return el("div", { class: "pick" }, box, el("label", { for: `pick-${t.name}` }, t.name,
      t.description ? el("span", { class: "muted" }, ` — ${t.description}`) : null));
  });
  input.addEventListener("input", () => boxes.forEach((b) => {
    const box = b.querySelector("input");
    box.checked = chosen().includes(box.value);
  }));
  return el("fieldset", { class: "picker", id: "type-picker" }, el("legend", {}, "Pick from the event types"), boxes);
}

async function eventTypesPage() {
  const types = await catalog();
  const rows = types.map((t) => el("tr", {},
    el("td", {}, el("code", {}, t.name)),
    el("td", {}, t.description || el("span", { class: "muted" }, t.registered ? "—" : "not described"), exampleOf(t)),
    el("td", { class: "wide" }, String(t.subscriptions)),
    el("td", { class: "wide" }, t.last_seen_at ? when(t.last_seen_at) : "—")));
  return [el("h1", {}, "Event types"),
    el("p", { class: "muted" }, "The types your platform sends: those it describes, those your endpoints name and those of the last week's events."),
    el("div", { class: "table" }, el("table", { id: "event-types" },
      el("thead", {}, el("tr", {}, el("th", {}, "Type"), el("th", {}, "Description"),
        el("th", { class: "wide" }, "Endpoints naming it"), el("th", { class: "wide" }, "Last seen"))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 4 }, "No event types yet.")))))];
}
