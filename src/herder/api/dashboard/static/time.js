// The one way the dashboard writes a moment: 24-hour and ISO-like, "2026-11-28 14:03:07",
// in the browser's zone (named once, in the header) or, for a schedule's fires, in the
// schedule's own. Every view formats through here, so one instant reads the same everywhere.

const formats = new Map(); // zone (or "" for the browser's) → its Intl formatter

function format(zone) {
  if (!formats.has(zone)) {
    formats.set(zone, new Intl.DateTimeFormat("sv-SE", {
      timeZone: zone || undefined, year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
      timeZoneName: zone ? "short" : undefined, // another zone than the header's says so
    }));
  }
  return formats.get(zone);
}

// "2026-11-28 14:03:07" in the browser's zone; in another ``zone`` with its offset,
// "2026-11-28 09:00:00 GMT+5:30". Throws on an unknown zone.
export function dateTime(moment, zone = "") {
  return format(zone).format(new Date(moment));
}

// "14:03:07": the time of day alone, for a clock or a chart's axis.
export function timeOfDay(moment) {
  return dateTime(moment).slice(11, 19);
}

// The browser's zone and its offset now, e.g. "Europe/Paris (UTC+01:00)".
export function browserZone(now = new Date()) {
  const minutes = -now.getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  const hours = String(Math.floor(Math.abs(minutes) / 60)).padStart(2, "0");
  const rest = String(Math.abs(minutes) % 60).padStart(2, "0");
  const name = Intl.DateTimeFormat().resolvedOptions().timeZone || "local time";
  return `${name} (UTC${sign}${hours}:${rest})`;
}
