// koala ui: refreshes the server-rendered part of the page every second
// and keeps one uPlot chart per placeholder (.spark[data-key]) alive
// across refreshes, feeding it the data the fragment carries.
(function () {
  "use strict";
  const live = document.getElementById("live");
  if (!live) return;
  const charts = new Map(); // data-key -> uPlot
  const updated = document.getElementById("updated");

  const fmtCount = (v) => v == null ? "" : Math.abs(v) >= 1e6 ? (v / 1e6).toFixed(1) + "M" : Math.abs(v) >= 1e3 ? (v / 1e3).toFixed(1) + "K" : v.toFixed(0);
  const fmtPct = (v) => v == null ? "" : (100 * v).toFixed(0) + "%";
  const fmtBytes = (v) => v == null ? "" : v >= 1048576 ? (v / 1048576).toFixed(1) + "MiB" : v >= 1024 ? (v / 1024).toFixed(1) + "KiB" : v.toFixed(0) + "B";

  // xRange is the time axis: the view's window ending at its time for a
  // task's chart, so that the charts of one page line up; from the
  // reconfiguration's start for the migration's (at least 30 s).
  function xRange(kind) {
    return (u, min, max) => {
      const job = live.querySelector("#job");
      const at = job ? Number(job.dataset.at) : 0;
      const span = job ? Number(job.dataset.window) : 120;
      const rc = live.querySelector("#reconfig");
      const end = Math.max(at, max);
      if (kind === "bytes" && rc) {
        const start = Number(rc.dataset.start) - 2;
        return [start, Math.max(end, start + 30)];
      }
      return [end - span, end];
    };
  }

  function options(kind, el) {
    const wide = el.classList.contains("wide");
    const line = (label, stroke, fill, value) => ({ label, stroke, fill, width: 1.5, value: (u, v) => value(v) });
    const series = [{}];
    let range = (u, lo, hi) => [0, Math.max(hi, 1)];
    switch (kind) {
      case "share":
        series.push(line("busy", "#d9480f", "rgba(217,72,15,0.15)", fmtPct), line("idle", "#2b8a3e", null, fmtPct));
        range = () => [0, 1];
        break;
      case "lag":
        series.push(line("lag", "#5f3dc4", "rgba(95,61,196,0.12)", fmtCount));
        break;
      case "bytes":
        series.push(line("bytes/s", "#1864ab", "rgba(24,100,171,0.15)", fmtBytes));
        break;
      default:
        series.push(line("records/s", "#1864ab", "rgba(24,100,171,0.15)", fmtCount));
    }
    return {
      width: wide ? 320 : 150,
      height: wide ? 70 : 36,
      pxAlign: false,
      cursor: { show: true, x: false, y: false, points: { show: false } },
      legend: { show: false },
      select: { show: false },
      scales: { x: { time: true, range: xRange(kind) }, y: { range } },
      axes: wide ? [{ show: true, size: 20, font: "10px sans-serif", stroke: "#868e96", grid: { show: false } },
                    { show: true, size: 48, font: "10px sans-serif", stroke: "#868e96", values: (u, vs) => vs.map(fmtBytes), grid: { stroke: "#eee" } }]
                 : [{ show: false }, { show: false }],
      series,
    };
  }

  // attach gives every chart placeholder in the fragment its chart: the
  // one it had before the refresh (moved in, new data) or a new one.
  function attach() {
    const blob = live.querySelector("script.charts");
    const data = blob ? JSON.parse(blob.textContent || "{}") : {};
    const seen = new Set();
    live.querySelectorAll(".spark[data-key]").forEach((el) => {
      const key = el.dataset.key;
      const d = data[key];
      if (!d || d[0].length === 0) return;
      seen.add(key);
      let c = charts.get(key);
      if (c && c.series.length !== d.length) { c.destroy(); c = null; }
      if (!c) {
        c = new uPlot(options(el.dataset.kind, el), d, el);
        charts.set(key, c);
      } else {
        el.appendChild(c.root);
        c.setData(d);
      }
      el.title = (el.title ? el.title + ": " : "") + "last " + d[0].length + " s";
    });
    for (const [key, c] of charts) {
      if (!seen.has(key)) { c.destroy(); charts.delete(key); }
    }
  }

  async function refresh() {
    try {
      const res = await fetch(live.dataset.src, { cache: "no-store" });
      const html = await res.text();
      live.innerHTML = html;
      attach();
      if (updated) updated.textContent = res.ok ? "updated " + new Date().toLocaleTimeString() : "HTTP " + res.status;
    } catch (err) {
      if (updated) updated.textContent = "not updated: " + err;
    } finally {
      setTimeout(refresh, 1000);
    }
  }

  attach();
  setTimeout(refresh, 1000);
})();
