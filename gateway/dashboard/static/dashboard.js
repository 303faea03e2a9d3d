// Squall dashboard: polls /_squall/ui/data every second, keeps the history in the page
// (the last 15 minutes) and draws it with uPlot. The document is described in
// docs/dashboard.md. Every figure element carries its raw number in data-value.
"use strict";

(function () {
  const DATA_URL = "/_squall/ui/data";
  const POLL_MS = 1000;
  const KEEP = 900;

  const $ = (id) => document.getElementById(id);
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

  function bytes(n) {
    if (n === null || n === undefined) return "–";
    let i = 0;
    let v = Math.abs(n);
    while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
    return (n < 0 ? "-" : "") + (i ? v.toFixed(v < 10 ? 2 : 1) : String(Math.round(v)))
      + " " + UNITS[i];
  }
  const rate = (n) => (n === null || n === undefined ? "measuring…" : bytes(n) + "/s");
  const pct = (a, b) => (b ? (100 * a / b).toFixed(1) + " %" : "–");
  function duration(s) {
    s = Math.round(s || 0);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }
  const clock = (t) => new Date(t * 1000).toLocaleTimeString();

  function show(id, text, value) {
    const el = $(id);
    el.textContent = text;
    if (value !== undefined) el.dataset.value = value === null ? "" : String(value);
  }

  function cell(row, text, cls) {
    const td = row.insertCell();
    td.textContent = text === null || text === undefined ? "–" : String(text);
    if (cls) td.className = cls;
    return td;
  }

  function fill(table, rows, build) {
    const body = $(table).tBodies[0];
    body.replaceChildren();
    for (const r of rows) build(body.insertRow(), r);
  }

  // -- history and charts ---------------------------------------------------------------
  const history = {
    t: [], used: [], dirty: [], capacity: [], ingest: [], flush: [], around: [],
    volSize: [], volCount: [], cost: [], costBackend: [], costCache: [],
  };

  function push(key, value) {
    const a = history[key];
    a.push(value);
    if (a.length > KEEP) a.shift();
  }

  const byteAxis = { values: (u, vals) => vals.map(bytes), size: 80 };
  const rateAxis = { values: (u, vals) => vals.map((v) => bytes(v) + "/s"), size: 90 };

  function chart(target, series, axis, extra) {
    const el = $(target);
    const opts = Object.assign({
      width: Math.max(300, el.clientWidth), height: 200,
      scales: { x: { time: true } },
      series: [{}].concat(series),
      axes: [{}, axis],
      legend: { live: false },
    }, extra || {});
    return new uPlot(opts, [[]].concat(series.map(() => [])), el);
  }

  const charts = {};
  function makeCharts() {
    charts.cache = chart("chart-cache", [
      { label: "used", stroke: "#2563eb", fill: "rgba(37,99,235,.10)" },
      { label: "dirty", stroke: "#d97706", fill: "rgba(217,119,6,.15)" },
      { label: "capacity", stroke: "#6b7280", dash: [4, 4] },
    ], byteAxis);
    charts.rates = chart("chart-rates", [
      { label: "ingest", stroke: "#7c3aed" },
      { label: "flush", stroke: "#059669" },
      { label: "write-around", stroke: "#9ca3af" },
    ], rateAxis);
    charts.volumes = chart("chart-volumes", [
      { label: "attached capacity", stroke: "#0891b2", fill: "rgba(8,145,178,.12)",
        paths: uPlot.paths.stepped({ align: 1 }) },
      { label: "volumes", stroke: "#6b7280", scale: "n",
        paths: uPlot.paths.stepped({ align: 1 }) },
    ], byteAxis, { axes: [{}, byteAxis, { scale: "n", side: 1, grid: { show: false } }],
                   scales: { x: { time: true }, n: { range: (u, min, max) => [0, max + 1] } } });
    charts.cost = chart("chart-cost", [
      { label: "total", stroke: "#111827" },
      { label: "backend", stroke: "#2563eb" },
      { label: "cache", stroke: "#d97706" },
    ], { size: 70 });
    window.addEventListener("resize", () => Object.values(charts).forEach(fit));
  }

  // A chart made in a hidden panel has no width yet: size it to its panel once shown.
  function fit(c) {
    const width = Math.max(300, c.root.parentElement.clientWidth);
    if (c.width !== width) c.setSize({ width: width, height: 200 });
  }

  function redraw() {
    const h = history;
    fit(charts.cache);
    fit(charts.rates);
    charts.cache.setData([h.t, h.used, h.dirty, h.capacity]);
    charts.rates.setData([h.t, h.ingest, h.flush, h.around]);
    if (!$("panel-volumes").hidden) {
      fit(charts.volumes);
      charts.volumes.setData([h.t, h.volSize, h.volCount]);
    }
    if (!$("panel-cost").hidden) {
      fit(charts.cost);
      charts.cost.setData([h.t, h.cost, h.costBackend, h.costCache]);
    }
  }

  // -- one document ---------------------------------------------------------------------
  function render(d) {
    const c = d.cache;
    const r = d.rates || {};
    $("backend").textContent = "backend " + (d.backend.kind || "") +
      (d.backend.reachable ? "" : ": unreachable");
    $("backend").className = "pill " + (d.backend.reachable ? "ok" : "bad");
    if (!d.backend.reachable && d.backend.reason) $("backend").title = d.backend.reason;
    $("summary").textContent = (d.ready ? "ready" : "starting") + " · up " +
      duration(d.uptime_s) + (d.workers > 1 ? " · " + d.workers + " workers" : "") +
      " · " + clock(d.time);

    if (c) {
      show("cache-fill", pct(c.used_bytes, c.capacity_bytes), c.used_bytes);
      show("cache-fill-sub", bytes(c.used_bytes) + " of " + bytes(c.capacity_bytes) +
        " (" + c.mode + ")");
      show("dirty-bytes", bytes(c.dirty_bytes), c.dirty_bytes);
      show("dirty-sub", c.dirty_objects + " objects" + (c.dirty_objects ?
        ", oldest " + duration(c.oldest_dirty_age_s) : "") +
        (c.quarantined_objects ? ", " + c.quarantined_objects + " quarantined" : ""));
      show("flush-phase", c.phase, c.phase);
      $("flush-phase").className = "value phase-" + c.phase;
      show("phase-sub", c.elastic_state ? "elastic: " + c.elastic_state : "");
      show("flush-sub", c.flush_inflight + " in flight, " + bytes(c.flush_bytes_total) +
        " flushed");
    } else {
      show("cache-fill", "no cache", null);
      show("dirty-bytes", "–", 0);
      show("flush-phase", "–", "");
    }
    show("ingest-rate", rate(r.ingest_bytes_per_s), r.ingest_bytes_per_s);
    show("writearound-sub", r.writearound_bytes_per_s ?
      "write-around " + rate(r.writearound_bytes_per_s) : "");
    show("flush-rate", rate(r.flush_bytes_per_s), r.flush_bytes_per_s);
    if (d.cost) {
      show("cost", d.cost.agbs.toFixed(3) + " " + d.cost.unit, d.cost.agbs);
      show("cost-sub", "backend " + d.cost.backend_agbs.toFixed(3) + ", cache " +
        d.cost.cache_agbs.toFixed(3) + " over " + duration(d.cost.elapsed_s));
      $("cost-unit").textContent = d.cost.unit;
    } else {
      show("cost", "–", null);
      show("cost-sub", "no cost meter (no cache tier)");
    }
    show("errors-total", String(d.errors_total), d.errors_total);
    show("slowdowns", d.slowdowns + " SlowDown answers");

    // history
    push("t", d.time);
    push("used", c ? c.used_bytes : null);
    push("dirty", c ? c.dirty_bytes : null);
    push("capacity", c ? c.capacity_bytes : null);
    push("ingest", r.ingest_bytes_per_s);
    push("flush", r.flush_bytes_per_s);
    push("around", r.writearound_bytes_per_s);
    const vols = c ? c.volumes : [];
    push("volSize", vols.reduce((s, v) => s + (v.size_bytes || 0), 0));
    push("volCount", vols.length);
    push("cost", d.cost ? d.cost.agbs : null);
    push("costBackend", d.cost ? d.cost.backend_agbs : null);
    push("costCache", d.cost ? d.cost.cache_agbs : null);
    $("panel-volumes").hidden = !(c && c.mode === "elastic");
    $("panel-cost").hidden = !d.cost;
    redraw();

    fill("volumes", vols, (row, v) => {
      cell(row, v.id + (v.worker !== undefined ? " (worker " + v.worker + ")" : ""));
      cell(row, v.provider);
      cell(row, bytes(v.size_bytes));
      cell(row, bytes(v.used_bytes) + " (" + pct(v.used_bytes, v.size_bytes) + ")");
      cell(row, v.state);
    });

    $("panel-members").hidden = !(d.members && d.members.length);
    fill("members", d.members || [], (row, m) => {
      cell(row, m.name + (m.self ? " (answering)" : ""));
      const h = cell(row, m.health, "health-" + m.health);
      if (m.error) h.title = m.error;
      cell(row, (100 * m.key_share).toFixed(1) + " %");
      cell(row, m.phase);
      cell(row, m.dirty_bytes === undefined ? null : bytes(m.dirty_bytes));
      cell(row, m.used_bytes === undefined ? null : bytes(m.used_bytes));
    });

    renderQos(d.qos);

    const errors = d.errors || [];
    $("errors-empty").hidden = errors.length > 0;
    fill("errors", errors.slice(0, 20), (row, e) => {
      cell(row, clock(e.time));
      cell(row, e.operation + (e.worker !== undefined ? " (worker " + e.worker + ")" : ""));
      cell(row, e.resource, "resource");
      cell(row, e.code, "status-" + String(e.status)[0]);
      cell(row, e.status, "status-" + String(e.status)[0]);
    });
  }

  // QoS (per-bucket gears): shown only when the status has a "qos" section. Accepts a
  // list of rows ({bucket, ...}), {"buckets": [...]} or {bucket: {...}}.
  function renderQos(qos) {
    $("panel-qos").hidden = !qos;
    if (!qos) return;
    let rows = Array.isArray(qos) ? qos : Array.isArray(qos.buckets) ? qos.buckets :
      Object.entries(qos.buckets || qos).map(([bucket, v]) =>
        Object.assign({ bucket: bucket }, typeof v === "object" && v ? v : { value: v }));
    rows = rows.filter((r) => r && typeof r === "object");
    const cols = [];
    for (const r of rows) {
      for (const [k, v] of Object.entries(r)) {
        if (typeof v !== "object" && !cols.includes(k)) cols.push(k);
      }
    }
    const head = $("qos").tHead;
    head.replaceChildren();
    const hr = head.insertRow();
    for (const k of cols) {
      const th = document.createElement("th");
      th.textContent = k.replace(/_/g, " ");
      hr.appendChild(th);
    }
    const num = (v) => (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(1) : v);
    fill("qos", rows, (row, r) => { for (const k of cols) cell(row, num(r[k])); });
  }

  // -- access -----------------------------------------------------------------------------
  // A gateway without --public-status answers the data only to a bearer status token: the
  // page asks for it once and keeps it for this tab (sessionStorage), never in the URL.
  const TOKEN_KEY = "squall-status-token";
  // The address squall serve prints carries the token in its fragment (#token=...), which
  // no browser sends to a server: keep it for this tab and take it out of the address bar.
  const given = new URLSearchParams(location.hash.slice(1)).get("token");
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    window.history.replaceState(null, "", location.pathname + location.search);
  }
  function authHeaders() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }
  function askForToken(refused) {
    const form = $("login");
    $("login-message").textContent = sessionStorage.getItem(TOKEN_KEY)
      ? "Not authorised: the status token was refused (a token printed by squall serve "
        + "lasts as long as that run)."
      : "Not authorised: this gateway shows its status to holders of its status token. "
        + "Open the dashboard address squall serve printed (it carries a token), or give "
        + "the token set with --status-token.";
    form.hidden = false;
    form.dataset.refused = String(refused);
  }
  $("login").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    $("login").hidden = true;
  });

  // -- polling --------------------------------------------------------------------------
  async function poll() {
    const conn = $("connection");
    try {
      const response = await fetch(DATA_URL, { cache: "no-store", headers: authHeaders() });
      if (response.status === 401 || response.status === 403) {
        askForToken(response.status);
        conn.textContent = "not authorised";
        conn.className = "pill warn";
        conn.title = "HTTP " + response.status + ": the status token is missing or refused";
        return;
      }
      if (!response.ok) throw new Error("HTTP " + response.status);
      $("login").hidden = true;
      render(await response.json());
      conn.textContent = "live";
      conn.className = "pill ok";
      conn.title = "";
    } catch (err) {
      conn.textContent = "disconnected";
      conn.className = "pill bad";
      conn.title = String(err);
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  makeCharts();
  poll();
})();
