// The tenant portal's times (loaded before portal.js, whose pages use
// these): how a time is shown, and how a time field is read.
"use strict";

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
  const [y, mo, day, h, mi] = m ? m.slice(1).map((x) => Number(x || 0)) : [];
  const d = m ? new Date(y, mo - 1, day, h, mi) : null;
  // Each part as written (no 31 April rolled into May, no hour 25).
  const exact = d && !isNaN(d) && d.getFullYear() === y && d.getMonth() === mo - 1 && d.getDate() === day
    && d.getHours() === h && d.getMinutes() === mi;
  if (!exact) throw new Error(`${name}: write a time as YYYY-MM-DD HH:MM (your local time, ${zoneName(new Date())}).`);
  return d;
}

function timeInput(id, value) {
  return el("input", { id, name: id, placeholder: "YYYY-MM-DD HH:MM", value: value || "", autocomplete: "off" });
}
