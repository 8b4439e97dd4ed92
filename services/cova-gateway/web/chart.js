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
    const top_ = yMax ?? Math.max(1, ...all.map((p) => p.y));
    const span = Math.max(x1 - x0, 1);
    const px = (x) => (xs.length < 2 || x1 === x0 ? left + (width - left - right) / 2 : left + ((x - x0) / span) * (width - left - right));
    const py = (y) => top + (1 - y / top_) * (height - top - bottom);
    const described = lines.map((l) => `${l.name}: ${l.points.map((p) => `${when(p.x, span)} ${show(p.y)}`).join(", ")}`).join("; ");
    const chart = node("svg", { class: "chart chart-series", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `${title}. ${described}` });
    chart.append(node("title", {}, title));
    chart.append(
      node("line", { x1: left, y1: py(0), x2: width - right, y2: py(0), class: "chart-axis" }),
      node("line", { x1: left, y1: top, x2: left, y2: py(0), class: "chart-axis" }),
      node("text", { x: left - 6, y: py(top_), "text-anchor": "end", "dominant-baseline": "middle", class: "chart-tick" }, show(top_)),
      node("text", { x: left - 6, y: py(0), "text-anchor": "end", "dominant-baseline": "middle", class: "chart-tick" }, show(0)),
    );
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

  // Times (ms) counted in at most `max` equal spans of whole hours or days: [{x, y}], one
  // point per span from the first time to the last, empty spans included (as 0).
  function histogram(times, max = 30) {
    if (!times.length) return [];
    const t0 = Math.min(...times), t1 = Math.max(...times);
    const hour = 3600000;
    const units = [hour, 3 * hour, 6 * hour, 12 * hour, day, 7 * day, 30 * day, 365 * day];
    const unit = units.find((u) => Math.floor(t1 / u) - Math.floor(t0 / u) + 1 <= max) ?? 365 * day;
    const first = Math.floor(t0 / unit);
    const counts = new Array(Math.floor(t1 / unit) - first + 1).fill(0);
    for (const t of times) counts[Math.floor(t / unit) - first] += 1;
    return counts.map((y, i) => ({ x: (first + i) * unit, y }));
  }

  return Object.freeze({ bars, series, histogram });
})();
