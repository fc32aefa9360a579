// Finder's search page: search as you type over the JSON API, with hints, explain, facets
// and banners for degraded channels and builds in progress. No framework, no build step;
// every piece of data reaches the page through textContent, never as HTML.
"use strict";

(function () {
  const PAGE = 10;
  const DEBOUNCE_MS = 180;
  const $ = (id) => document.getElementById(id);

  const state = {
    space: "default",
    query: "",
    hits: [],
    offset: 0,
    total: 0,
    mode: "search", // or "similar"
    similarTo: null,
    filters: new Map(), // "tag" | "extras:key" -> value
    controller: null,
    statusTimer: null,
    lastResult: null,
    token: sessionStorage.getItem("finder-token") || "",
  };

  function base() {
    return state.space === "default" ? "/v1" : "/v1/spaces/" + encodeURIComponent(state.space);
  }

  async function api(method, path, body, signal) {
    const headers = { "Content-Type": "application/json" };
    if (state.token) headers["Authorization"] = "Bearer " + state.token;
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (response.status === 401) {
      showTokenForm();
    }
    if (!response.ok) {
      const error = new Error((data && data.message) || response.statusText);
      error.status = response.status;
      error.code = data && data.code;
      throw error;
    }
    return data;
  }

  // ---- banners -------------------------------------------------------------

  function showError(message) {
    const el = $("banner-error");
    el.textContent = message;
    el.hidden = !message;
  }

  function showTokenForm() {
    $("token-form").hidden = false;
    $("token").focus();
  }

  function showDegraded(diagnostics) {
    const el = $("banner-degraded");
    const degraded = ((diagnostics && diagnostics.channels) || []).filter((c) => c.status === "degraded");
    el.replaceChildren();
    if (degraded.length === 0) {
      el.hidden = true;
      return;
    }
    const strong = document.createElement("strong");
    strong.textContent = degraded.length === 1 ? "A search layer is degraded: " : "Search layers are degraded: ";
    el.append(strong);
    el.append(degraded.map((c) => c.channel + " — " + (c.reason || "no reason given")).join("; "));
    el.append(". Results come from the other layers.");
    el.hidden = false;
  }

  // ---- status --------------------------------------------------------------

  // What a run is doing, in words: the layer and its stage.
  function progressTitle(p) {
    const stages = {
      "indexing reading": "Reading your files…",
      "indexing committing": "Saving the index…",
      "indexing pages": "Writing result pages…",
      "indexing graph": "Linking notes…",
      "vectors queued": "Waiting to embed passages…",
      "vectors embedding": "Embedding passages for meaning search…",
      "vectors graph": "Placing passages in the vector graph…",
    };
    return stages[p.layer + " " + p.stage] || "Building search index…";
  }

  // How far: done / total, the rate and the time left when known.
  function progressFigures(p) {
    const parts = [p.total != null ? p.done.toLocaleString() + " / " + p.total.toLocaleString()
                                   : p.done ? p.done.toLocaleString() + " read" : ""];
    if (p.rate) parts.push(p.rate.toFixed(1) + "/s");
    if (p.seconds_left != null) parts.push(duration(p.seconds_left) + " left");
    return parts.filter(Boolean).join(" · ");
  }

  function duration(seconds) {
    const s = Math.round(seconds);
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
    return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  }

  async function refreshStatus() {
    clearTimeout(state.statusTimer);
    try {
      const status = await api("GET", base() + "/status");
      const index = status.index || {};
      $("index-state").textContent = status.built
        ? (index.sources || 0).toLocaleString() + " sources · " + (index.fragments || 0).toLocaleString() + " passages"
        : "no index yet";
      const building = status.building === true;
      $("banner-building").hidden = !building;
      const p = building ? status.progress : null;
      $("building-what").textContent = p ? progressTitle(p) : "Building search index…";
      $("building-progress").textContent = p ? progressFigures(p) : "";
      // A served space may start a run by itself (`serve --watch`, API writes): look again,
      // often while one runs.
      state.statusTimer = setTimeout(refreshStatus, building ? 2000 : 10000);
      if (!status.built) showEmpty("This space has no index yet. Run `finder index <INPUT> --index <DIR>` or add documents with PUT /v1/documents/{id}.");
    } catch (e) {
      if (e.status !== 401) $("index-state").textContent = "";
    }
  }

  async function loadSpaces() {
    try {
      const data = await api("GET", "/v1/spaces");
      const spaces = data.spaces || [];
      const select = $("space");
      select.replaceChildren();
      for (const s of spaces) {
        const option = document.createElement("option");
        option.value = s.name;
        option.textContent = s.name + (s.built ? "" : " (empty)");
        select.append(option);
      }
      if (!spaces.some((s) => s.name === state.space) && spaces.length) state.space = spaces[0].name;
      select.value = state.space;
      $("space-picker").hidden = spaces.length < 2;
    } catch (_) {
      $("space-picker").hidden = true;
    }
  }

  // ---- search --------------------------------------------------------------

  let debounceTimer = null;

  function scheduleSearch() {
    clearTimeout(debounceTimer);
    debounceTimer = setTimeout(() => runSearch(false), DEBOUNCE_MS);
  }

  async function runSearch(append) {
    const query = $("q").value.trim();
    state.mode = "search";
    state.similarTo = null;
    syncUrl(query);
    if (!append) {
      state.offset = 0;
      state.filters.clear();
    }
    if (!query) {
      if (state.controller) state.controller.abort();
      state.query = "";
      state.hits = [];
      render(null);
      return;
    }
    if (state.controller) state.controller.abort();
    const controller = new AbortController();
    state.controller = controller;
    document.body.classList.add("loading");
    try {
      const result = await api("POST", base() + "/search", { query, limit: PAGE, offset: state.offset }, controller.signal);
      if (controller !== state.controller) return;
      state.query = query;
      state.hits = append ? state.hits.concat(result.hits) : result.hits;
      state.total = result.diagnostics.ranked_sources;
      showError("");
      render(result);
    } catch (e) {
      if (e.name === "AbortError") return;
      if (e.code === "index_not_built") {
        state.hits = [];
        render(null);
        showEmpty(e.message);
      } else if (e.status !== 401) {
        showError(e.message);
      }
    } finally {
      if (controller === state.controller) document.body.classList.remove("loading");
    }
  }

  async function runSimilar(hit) {
    if (state.controller) state.controller.abort();
    const controller = new AbortController();
    state.controller = controller;
    try {
      const result = await api("POST", base() + "/recommend", { target: hit.id, limit: PAGE }, controller.signal);
      if (controller !== state.controller) return;
      state.mode = "similar";
      state.similarTo = hit;
      state.query = result.query;
      state.hits = result.hits;
      state.total = result.hits.length;
      state.filters.clear();
      showError("");
      render(result);
      window.scrollTo({ top: 0 });
    } catch (e) {
      if (e.name !== "AbortError" && e.status !== 401) showError(e.message);
    }
  }

  function syncUrl(query) {
    const url = new URL(window.location.href);
    if (query) url.searchParams.set("q", query);
    else url.searchParams.delete("q");
    if (state.space !== "default") url.searchParams.set("space", state.space);
    else url.searchParams.delete("space");
    history.replaceState(null, "", url);
  }

  // ---- rendering -----------------------------------------------------------

  function showEmpty(message) {
    const el = $("empty");
    el.textContent = message || "";
    el.hidden = !message;
  }

  function render(result) {
    state.lastResult = result;
    const list = $("results");
    list.replaceChildren();
    showDegraded(result && result.diagnostics);
    renderFacets();
    const visible = state.hits.filter(passesFilters);
    for (const hit of visible) list.append(renderHit(hit));
    const line = $("summary-line");
    line.replaceChildren();
    if (result) {
      if (state.mode === "similar") {
        line.append("Similar to ");
        const b = document.createElement("strong");
        b.textContent = state.similarTo.envelope.title || state.similarTo.id;
        line.append(b, " · by words in its title and summary");
      } else {
        const n = state.total;
        line.append(n === 0 ? "No results" : n.toLocaleString() + (n === 1 ? " result" : " results"));
      }
      line.append(" · " + result.diagnostics.total_ms.toFixed(1) + " ms");
      if (state.filters.size) line.append(" · " + visible.length + " shown after filters");
    }
    showEmpty(result && state.hits.length === 0 && state.mode === "search" ? "Nothing matches “" + state.query + "”. Try fewer or other words." : "");
    $("more").hidden = !(result && state.mode === "search" && state.hits.length < state.total);
    renderDiagnostics(result && result.diagnostics);
  }

  function passesFilters(hit) {
    for (const [key, value] of state.filters) {
      if (key === "tag") {
        if (!(hit.envelope.tags || []).includes(value)) return false;
      } else {
        const extra = key.slice("extras:".length);
        if ((hit.envelope.extras || {})[extra] !== value) return false;
      }
    }
    return true;
  }

  function renderHit(hit) {
    const node = $("hit-template").content.firstElementChild.cloneNode(true);
    node.dataset.id = hit.id;
    node.querySelector(".rank").textContent = hit.rank + ".";
    node.querySelector(".title").textContent = hit.envelope.title || hit.id;
    node.querySelector(".score-value").textContent = hit.score.toFixed(3);
    node.querySelector(".score-fill").style.width = Math.round(Math.max(0, Math.min(1, hit.score)) * 100) + "%";
    node.querySelector(".path").textContent = hit.envelope.path || hit.id;
    node.querySelector(".date").textContent = hit.envelope.date || "";
    const tags = node.querySelector(".tags");
    for (const tag of hit.envelope.tags || []) tags.append(chip("#" + tag, () => toggleFilter("tag", tag)));
    const extras = node.querySelector(".extras");
    for (const [k, v] of Object.entries(hit.envelope.extras || {})) extras.append(chip(k + ": " + v, () => toggleFilter("extras:" + k, v)));
    highlight(node.querySelector(".summary"), hit.summary || "");
    const hints = node.querySelector(".hints");
    for (const hint of hit.hints) {
      const li = document.createElement("li");
      li.className = "hint";
      const lines = document.createElement("span");
      lines.className = "lines";
      const e = hint.extent;
      lines.textContent = (e.page ? "p" + e.page + " " : "") + (e.line_start === e.line_end ? "L" + e.line_start : "L" + e.line_start + "–" + e.line_end);
      lines.title = "Lines " + e.line_start + "–" + e.line_end + " (bytes " + e.byte_start + "–" + e.byte_end + ") of " + (hit.envelope.path || hit.id);
      const text = document.createElement("span");
      text.className = "preview";
      highlight(text, hint.preview);
      li.append(lines, text);
      hints.append(li);
    }
    const toggle = node.querySelector(".explain-toggle");
    const drawer = node.querySelector(".explain");
    toggle.addEventListener("click", () => {
      const open = drawer.hidden;
      if (open && !drawer.firstChild) drawer.append(renderExplain(hit));
      drawer.hidden = !open;
      toggle.setAttribute("aria-expanded", String(open));
      toggle.textContent = open ? "Hide explain" : "Explain";
    });
    node.querySelector(".similar").addEventListener("click", () => runSimilar(hit));
    return node;
  }

  function chip(label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "chip";
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  function renderExplain(hit) {
    const x = hit.explain;
    const wrap = document.createElement("div");
    const p = document.createElement("p");
    p.className = "formula";
    p.textContent =
      "score " + hit.score.toFixed(3) + " = raw " + x.raw.toFixed(5) + " ÷ " + x.normalized_by.toFixed(5) +
      " (the best hit's raw score). raw = Σ weight × seed over the source's best passages" +
      (x.other_fragments ? "; " + x.other_fragments + " more matching passage" + (x.other_fragments === 1 ? "" : "s") + " beyond the rollup weights." : ".");
    wrap.append(p);
    const table = document.createElement("table");
    const head = table.createTHead().insertRow();
    for (const h of ["passage", "weight", "seed (RRF)", "lists: channel · rank · score · share"]) {
      const th = document.createElement("th");
      th.textContent = h;
      head.append(th);
    }
    const body = table.createTBody();
    for (const part of x.parts) {
      const row = body.insertRow();
      row.insertCell().textContent = "#" + part.fragment;
      row.insertCell().textContent = part.weight.toString();
      row.insertCell().textContent = part.seed.toFixed(5);
      const lists = row.insertCell();
      for (const l of part.lists) {
        const span = document.createElement("span");
        span.className = "list-rank " + l.channel;
        span.textContent = l.channel + " · #" + l.rank + " · " + Number(l.score).toFixed(2) + " · " + l.share.toFixed(5);
        lists.append(span);
      }
    }
    wrap.append(table);
    return wrap;
  }

  function renderFacets() {
    const aside = $("facets");
    aside.replaceChildren();
    const tags = new Map();
    const extras = new Map();
    for (const hit of state.hits) {
      for (const t of hit.envelope.tags || []) tags.set(t, (tags.get(t) || 0) + 1);
      for (const [k, v] of Object.entries(hit.envelope.extras || {})) {
        if (!extras.has(k)) extras.set(k, new Map());
        extras.get(k).set(v, (extras.get(k).get(v) || 0) + 1);
      }
    }
    if (tags.size) aside.append(facetGroup("Tags", "tag", tags));
    // An extras key on a single hit filters nothing; show keys shared by two hits or more.
    for (const [k, values] of extras) {
      let n = 0;
      for (const c of values.values()) n += c;
      if (n >= 2 || state.filters.has("extras:" + k)) aside.append(facetGroup(k, "extras:" + k, values));
    }
    aside.hidden = !aside.firstChild;
  }

  function facetGroup(title, key, counts) {
    const section = document.createElement("section");
    section.className = "facet";
    const h = document.createElement("h3");
    h.textContent = title;
    section.append(h);
    const ul = document.createElement("ul");
    const sorted = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    for (const [value, n] of sorted) {
      const li = document.createElement("li");
      const b = document.createElement("button");
      b.type = "button";
      b.className = "facet-value" + (state.filters.get(key) === value ? " active" : "");
      const label = document.createElement("span");
      label.textContent = value;
      const count = document.createElement("span");
      count.className = "count";
      count.textContent = n;
      b.append(label, count);
      b.addEventListener("click", () => toggleFilter(key, value));
      li.append(b);
      ul.append(li);
    }
    section.append(ul);
    return section;
  }

  function toggleFilter(key, value) {
    if (state.filters.get(key) === value) state.filters.delete(key);
    else state.filters.set(key, value);
    render(state.lastResult);
  }

  function renderDiagnostics(d) {
    const box = $("diagnostics");
    if (!d || !d.channels) {
      box.hidden = true;
      return;
    }
    const body = $("diagnostics-body");
    body.replaceChildren();
    const ul = document.createElement("ul");
    for (const c of d.channels) {
      const li = document.createElement("li");
      li.className = "channel " + c.status;
      li.textContent = c.channel + ": " + c.status + (c.status === "ran" ? " (" + c.hits + " passages, " + c.ms.toFixed(1) + " ms)" : "") + (c.reason ? " — " + c.reason : "");
      ul.append(li);
    }
    const stages = document.createElement("p");
    stages.className = "stages";
    stages.textContent = "Stages: " + (d.stages || []).map((s) => s.stage + " " + s.ms.toFixed(2) + " ms").join(" · ");
    body.append(ul, stages);
    box.hidden = false;
  }

  // Marks the query's words (and words starting with them) in `text`.
  function highlight(el, text) {
    el.replaceChildren();
    const words = (state.mode === "search" ? state.query : "")
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((w) => w.length > 1);
    if (!words.length) {
      el.textContent = text;
      return;
    }
    const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
    const re = new RegExp("(?<![\\p{L}\\p{N}])(" + escaped.join("|") + ")[\\p{L}\\p{N}]*", "giu");
    let last = 0;
    for (const m of text.matchAll(re)) {
      if (m.index > last) el.append(text.slice(last, m.index));
      const mark = document.createElement("mark");
      mark.textContent = m[0];
      el.append(mark);
      last = m.index + m[0].length;
    }
    if (last < text.length) el.append(text.slice(last));
  }

  // ---- wiring --------------------------------------------------------------

  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    clearTimeout(debounceTimer);
    runSearch(false);
  });
  $("q").addEventListener("input", scheduleSearch);
  $("more").addEventListener("click", () => {
    state.offset = state.hits.length;
    runSearch(true);
  });
  $("space").addEventListener("change", (e) => {
    state.space = e.target.value;
    refreshStatus();
    runSearch(false);
  });
  $("token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value.trim();
    sessionStorage.setItem("finder-token", state.token);
    $("token-form").hidden = true;
    start();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "/" && document.activeElement !== $("q")) {
      e.preventDefault();
      $("q").focus();
      $("q").select();
    }
  });

  async function start() {
    const params = new URLSearchParams(window.location.search);
    state.space = params.get("space") || "default";
    await loadSpaces();
    await refreshStatus();
    const q = params.get("q");
    if (q && !$("q").value) $("q").value = q;
    if ($("q").value.trim()) runSearch(false);
  }

  start();
})();
