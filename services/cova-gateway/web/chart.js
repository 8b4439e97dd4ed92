"use strict";
// cova's charts: small SVG drawings of numbers the API answers, with no dependency and nothing
// inline (sizes are SVG attributes, colours CSS classes), so the page's strict CSP holds.
// Every chart is a <figure> with a caption and an accessible description of its values.

const CovaChart = (() => {
  const NS = "http://www.w3.org/2000/svg";

  function node(tag, attrs = {}, text) {
    const el = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) if (v != null) el.setAttribute(k, String(v));
    if (text != null) el.textContent = text;
    return el;
  }

  function figure(title, chart, id, note) {
    const fig = document.createElement("figure");
    fig.className = "chart-figure";
    if (id) fig.id = id;
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    fig.append(caption, chart);
    if (note) {
      const p = document.createElement("p");
      p.className = "muted chart-note";
      p.textContent = note;
      fig.append(p);
    }
    return fig;
  }

  const shorten = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

  // Horizontal bars, one per row: {label, value, cls}. `percent` draws shares of 1.
  function bars(title, rows, { percent = false, id, format } = {}) {
    const show = format ?? ((x) => (percent
      ? Number(x ?? 0).toLocaleString(undefined, { style: "percent", maximumFractionDigits: 1 })
      : Number(x ?? 0).toLocaleString()));
    const rowH = 30, labelW = 170, barW = 320, valueW = 70;
    const width = labelW + barW + valueW;
    const height = Math.max(rows.length, 1) * rowH;
    const max = percent ? 1 : Math.max(1, ...rows.map((r) => r.value));
    const chart = node("svg", {
      class: "chart", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "aria-label": `${title}: ${rows.map((r) => `${r.label} ${show(r.value)}`).join(", ")}`,
    });
    chart.append(node("title", {}, title));
    rows.forEach((r, i) => {
      const y = i * rowH;
      const w = r.value > 0 ? Math.max((r.value / max) * barW, 2) : 0;
      chart.append(
        node("text", { x: labelW - 10, y: y + rowH / 2, "text-anchor": "end", "dominant-baseline": "middle", class: "chart-label" }, shorten(r.label, 22)),
        node("rect", { x: labelW, y: y + 6, width: barW, height: rowH - 12, rx: 4, class: "chart-track" }),
        node("rect", { x: labelW, y: y + 6, width: w.toFixed(1), height: rowH - 12, rx: 4, class: `chart-bar ${r.cls ?? ""}` }),
        node("text", { x: labelW + barW + 8, y: y + rowH / 2, "dominant-baseline": "middle", class: "chart-value" }, show(r.value)),
      );
    });
    return figure(title, chart, id);
  }

  const day = 86400000;
  function when(ms, span) {
    const d = new Date(ms);
    return span > 2 * day ? d.toLocaleDateString() : d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" });
  }

  // One or more series over time: [{name, cls, points: [{x: ms, y}]}], a line with a dot per
  // point (class `chart-point`, each with its value as a tooltip) and the first and last
  // times and the top value on the axes. `format` writes a value.
  function series(title, lines, { id, format, note, yMax } = {}) {
    const show = format ?? ((y) => Number(y).toLocaleString());
    const width = 560, height = 220, left = 56, right = 16, top = 14, bottom = 34;
    const all = lines.flatMap((l) => l.points);
    const xs = all.map((p) => p.x);
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    const ticks = yMax != null ? [0, yMax / 2, yMax] : niceTicks(Math.max(1, ...all.map((p) => p.y)));
    const top_ = ticks[ticks.length - 1];
    const span = Math.max(x1 - x0, 1);
    const px = (x) => (xs.length < 2 || x1 === x0 ? left + (width - left - right) / 2 : left + ((x - x0) / span) * (width - left - right));
    const py = (y) => top + (1 - y / top_) * (height - top - bottom);
    const described = lines.map((l) => `${l.name}: ${l.points.map((p) => `${when(p.x, span)} ${show(p.y)}`).join(", ")}`).join("; ");
    const chart = node("svg", { class: "chart chart-series", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `${title}. ${described}` });
    chart.append(node("title", {}, title));
    chart.append(
      node("line", { x1: left, y1: py(0), x2: width - right, y2: py(0), class: "chart-axis" }),
      node("line", { x1: left, y1: top, x2: left, y2: py(0), class: "chart-axis" }),
    );
    yAxis(chart, ticks, py, left, width - right, show);
    if (xs.length) {
      chart.append(node("text", { x: left, y: height - 10, class: "chart-tick" }, when(x0, span)));
      if (x1 !== x0) chart.append(node("text", { x: width - right, y: height - 10, "text-anchor": "end", class: "chart-tick" }, when(x1, span)));
    }
    lines.forEach((l) => {
      const pts = [...l.points].sort((a, b) => a.x - b.x);
      if (pts.length > 1) {
        chart.append(node("polyline", { points: pts.map((p) => `${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`).join(" "), class: `chart-line ${l.cls ?? ""}` }));
      }
      for (const p of pts) {
        const dot = node("circle", { cx: px(p.x).toFixed(1), cy: py(p.y).toFixed(1), r: 3.5, class: `chart-point ${l.cls ?? ""}`, "data-y": p.y });
        dot.append(node("title", {}, `${l.name}: ${show(p.y)} (${when(p.x, span)})`));
        chart.append(dot);
      }
    });
    const fig = figure(title, chart, id, note);
    if (lines.length > 1) {
      const legend = document.createElement("p");
      legend.className = "chart-legend";
      for (const l of lines) {
        const key = document.createElement("span");
        key.className = `chart-key ${l.cls ?? ""}`;
        key.textContent = l.name;
        legend.append(key);
      }
      fig.append(legend);
    }
    return fig;
  }

  // Round steps for a value axis from 0 to at least `max`: 0, step, 2·step … (step 1, 2 or 5
  // times a power of ten, whole numbers for counts), at most about five labels.
  function niceTicks(max) {
    const raw = Math.max(max, 1) / 4;
    const power = 10 ** Math.floor(Math.log10(raw));
    const step = Math.max(1, [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw));
    const ticks = [];
    for (let v = 0; v < max + step; v += step) ticks.push(v);
    return ticks.length > 1 ? ticks : [0, step];
  }

  // Labels and light grid lines for each tick of a value axis.
  function yAxis(chart, ticks, py, x0, x1, show) {
    for (const t of ticks) {
      if (t > 0) chart.append(node("line", { x1: x0, y1: py(t), x2: x1, y2: py(t), class: "chart-grid" }));
      chart.append(node("text", { x: x0 - 6, y: py(t), "text-anchor": "end", "dominant-baseline": "middle", class: "chart-tick y-tick" }, show(t)));
    }
  }

  const minute = 60000, hour = 3600000;
  // Bucket sizes a timeline chooses from, smallest first, with how a label names one.
  const BUCKETS = [
    [minute, "minute"], [5 * minute, "5 minutes"], [10 * minute, "10 minutes"], [15 * minute, "15 minutes"],
    [30 * minute, "30 minutes"], [hour, "hour"], [3 * hour, "3 hours"], [6 * hour, "6 hours"], [12 * hour, "12 hours"],
    [day, "day"], [7 * day, "week"], [30 * day, "30 days"], [365 * day, "year"],
  ];

  // Times (ms) counted in buckets of the smallest size that draws the span in at most `max`
  // of them, aligned to the reader's clock: {unit, name, buckets: [{x, y}]}, empty buckets
  // included (as 0). A post an hour old is counted in minutes, one a month old in days.
  function buckets(times, max = 30) {
    const shift = new Date(Math.min(...times)).getTimezoneOffset() * minute;
    const t0 = Math.min(...times) - shift, t1 = Math.max(...times) - shift;
    const [unit, name] = BUCKETS.find(([u]) => Math.floor(t1 / u) - Math.floor(t0 / u) + 1 <= max) ?? BUCKETS[BUCKETS.length - 1];
    const first = Math.floor(t0 / unit);
    const counts = new Array(Math.floor(t1 / unit) - first + 1).fill(0);
    for (const t of times) counts[Math.floor((t - shift) / unit) - first] += 1;
    return { unit, name, buckets: counts.map((y, i) => ({ x: (first + i) * unit + shift, y })) };
  }

  // When a bucket starts, as short as its size allows.
  function bucketLabel(ms, unit, spansDays) {
    const d = new Date(ms);
    if (unit >= day) return d.toLocaleDateString(undefined, { month: "short", day: "numeric", year: unit >= 30 * day ? "numeric" : undefined });
    const time = d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
    return spansDays ? `${d.toLocaleDateString(undefined, { month: "short", day: "numeric" })} ${time}` : time;
  }

  // A histogram of times: one column per bucket (class `chart-column`, its count in `data-y`),
  // both axes labelled, the bucket size named on the value axis. A single bucket is one column.
  function timeline(title, times, { id } = {}) {
    const { unit, name, buckets: cols } = buckets(times);
    const width = 560, height = 240, left = 56, right = 16, top = 14, bottom = 48;
    const ticks = niceTicks(Math.max(...cols.map((c) => c.y)));
    const top_ = ticks[ticks.length - 1];
    const plotW = width - left - right;
    const slot = plotW / Math.max(cols.length, 1);
    const barW = Math.max(2, Math.min(slot * 0.8, 80));
    const py = (y) => top + (1 - y / top_) * (height - top - bottom);
    const spansDays = new Date(cols[0].x).toDateString() !== new Date(cols[cols.length - 1].x + unit - 1).toDateString();
    const per = `Comments per ${name}`;
    const chart = node("svg", {
      class: "chart chart-series chart-timeline", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
      "aria-label": `${title}, ${per.toLowerCase()}: ${cols.map((c) => `${bucketLabel(c.x, unit, spansDays)} ${c.y}`).join(", ")}`,
      "data-unit": unit,
    });
    chart.append(node("title", {}, title));
    chart.append(node("line", { x1: left, y1: py(0), x2: width - right, y2: py(0), class: "chart-axis" }));
    yAxis(chart, ticks, py, left, width - right, (v) => Number(v).toLocaleString());
    cols.forEach((c, i) => {
      const x = left + i * slot + (slot - barW) / 2;
      const col = node("rect", { x: x.toFixed(1), y: py(c.y).toFixed(1), width: barW.toFixed(1), height: (py(0) - py(c.y)).toFixed(1), class: "chart-column", "data-y": c.y, "data-x": c.x });
      col.append(node("title", {}, `${bucketLabel(c.x, unit, spansDays)}: ${c.y.toLocaleString()} comment${c.y === 1 ? "" : "s"}`));
      chart.append(col);
    });
    // A few time labels, spread evenly, each under its column: five short ones (times), or
    // three when each names its day too, so that they never overlap.
    const every = Math.max(1, Math.ceil(cols.length / (spansDays && unit < day ? 3 : 5)));
    cols.forEach((c, i) => {
      if (i % every) return;
      chart.append(node("text", { x: left + i * slot + slot / 2, y: height - 28, "text-anchor": "middle", class: "chart-tick x-tick" }, bucketLabel(c.x, unit, spansDays)));
    });
    // The span goes under the time axis, which has the room: drawn up the short value axis,
    // "Comments per 5 minutes" ran past the chart on a phone.
    chart.append(node("text", { x: left + plotW / 2, y: height - 6, "text-anchor": "middle", class: "chart-axis-title" }, `When written, per ${name} (your time)`));
    // Its baseline far enough in that the letters (drawn larger on a phone) stay on the chart.
    chart.append(node("text", { x: 17, y: top + (height - top - bottom) / 2, "text-anchor": "middle", transform: `rotate(-90 17 ${top + (height - top - bottom) / 2})`, class: "chart-axis-title" }, "Comments"));
    return figure(title, chart, id, `${per}, by when each comment was written, replies included.`);
  }

  // Marks spans of time on a timeline (its figure): a band behind the columns the span
  // touches (class `chart-mark`, `data-kind`), titled with its label.
  function mark(fig, spans) {
    const svg = fig.querySelector("svg.chart-timeline");
    if (!svg) return;
    const unit = Number(svg.dataset.unit);
    const cols = [...svg.querySelectorAll("rect.chart-column")];
    const first = cols[0];
    if (!first) return;
    const top = 14, bottom = Number(svg.getAttribute("height")) - 48;
    for (const s of spans) {
      const hit = cols.filter((c) => Number(c.dataset.x) < s.end && Number(c.dataset.x) + unit > s.start);
      if (!hit.length) continue;
      const x0 = Math.min(...hit.map((c) => Number(c.getAttribute("x")))) - 2;
      const x1 = Math.max(...hit.map((c) => Number(c.getAttribute("x")) + Number(c.getAttribute("width")))) + 2;
      const band = node("rect", { x: x0.toFixed(1), y: top, width: (x1 - x0).toFixed(1), height: bottom - top, class: `chart-mark chart-mark-${s.kind}`, "data-kind": s.kind, "data-start": s.start, "data-end": s.end });
      band.append(node("title", {}, s.label));
      svg.insertBefore(band, first);
      const label = node("text", { x: ((x0 + x1) / 2).toFixed(1), y: top + 10, "text-anchor": "middle", class: "chart-mark-label" }, s.kind === "sentiment" ? "turned negative" : "spike");
      svg.append(label);
      // A mark at either end of the timeline keeps its words on the chart.
      const width = Number(svg.getAttribute("width")), b = box(label);
      if (b.x + b.width > width - 2) label.setAttribute("text-anchor", "end"), label.setAttribute("x", Math.min(x1, width - 2).toFixed(1));
      else if (b.x < 2) label.setAttribute("text-anchor", "start"), label.setAttribute("x", Math.max(x0, 2).toFixed(1));
      // Two marks of the same hours (a spike that also turned negative) would print their
      // words over each other: a label that meets one already drawn goes a line lower.
      const others = [...svg.querySelectorAll(".chart-mark-label")].filter((l) => l !== label);
      for (let line = 1; line < 6 && others.some((o) => meets(box(o), box(label))); line++) {
        label.setAttribute("y", top + 10 + line * LINE);
      }
    }
  }

  // A label's line height, in the chart's units.
  const LINE = 13;

  // Where a text is drawn (measured once it is on the page; estimated before).
  function box(text) {
    try {
      const b = text.getBBox();
      if (b.width > 0) return b;
    } catch (_) { /* not on the page yet */ }
    const width = text.textContent.length * 6.5;
    const y = Number(text.getAttribute("y"));
    return { x: Number(text.getAttribute("x")) - width / 2, y: y - 10, width, height: 12 };
  }

  function meets(a, b) {
    return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
  }

  return Object.freeze({ bars, series, timeline, mark });
})();
