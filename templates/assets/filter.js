/* The run index's filter (issue 22). Works from file:// under script-src 'self': the data
   comes as scripts (../filter/index.js and its shards) that call nrllmFilter.index and
   nrllmFilter.shard; nothing is fetched, nothing evaluated. Every word it shows comes from
   the page (the section's data-words and its template), so it holds none of its own. */
"use strict";
(function () {
  const section = document.getElementById("run-filter");
  if (!section) { return; }
  const form = section.querySelector(".filter-form");
  const words = JSON.parse(section.dataset.words);
  const language = section.dataset.language;
  const zone = section.dataset.timezone;
  const root = section.dataset.root;
  const countLine = section.querySelector(".filter-count");
  const region = section.querySelector(".table-scroll");
  const body = section.querySelector("tbody");
  const more = section.querySelector(".filter-more");
  const failedMark = section.querySelector("template.filter-failed-mark");
  const integer = new Intl.NumberFormat(language);
  const tenths = new Intl.NumberFormat(language, { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  const money = new Intl.NumberFormat(language, { minimumFractionDigits: 2, maximumFractionDigits: 6 });
  const dateTime = new Intl.DateTimeFormat(language, { dateStyle: "medium", timeStyle: "medium", timeZone: zone });
  const zoneParts = new Intl.DateTimeFormat("en-US", {
    timeZone: zone, hourCycle: "h23", year: "numeric", month: "numeric", day: "numeric",
    hour: "numeric", minute: "numeric", second: "numeric",
  });
  const FIELDS = ["run", "server", "tool", "outcome", "status", "configuration", "from", "to", "over"];
  const state = { index: null, shards: new Map(), loading: new Map(), query: 0, matches: [], shown: 0 };

  const fieldOf = name => form.querySelector(`[name="${name}"]`);
  const fill = (text, values) => text.replace(/%\((\w+)\)s/g, (all, name) => values[name]);

  /* Seconds since 1970 of a wall time in the site's zone ("2026-09-18T14:03[:22]"). */
  function zoneSeconds(text) {
    const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(text);
    if (!match) { return null; }
    const [, y, mo, d, h, mi, s] = match.map(Number);
    const wall = Date.UTC(y, mo - 1, d, h, mi, s || 0) / 1000;
    const offset = at => {
      const parts = {};
      for (const part of zoneParts.formatToParts(new Date(at * 1000))) { parts[part.type] = Number(part.value); }
      return Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second) / 1000 - at;
    };
    let moment = wall - offset(wall);
    moment = wall - offset(moment);
    return moment;
  }

  function wanted() {
    const query = {};
    for (const name of FIELDS) {
      const field = fieldOf(name);
      if (field && field.value.trim() !== "") { query[name] = field.value.trim(); }
    }
    return query;
  }

  function writeFragment(query) {
    const params = new URLSearchParams(query).toString();
    history.replaceState(null, "", params ? "#" + params : location.pathname + location.search);
  }

  function readFragment() {
    const params = new URLSearchParams(location.hash.slice(1));
    for (const name of FIELDS) {
      const field = fieldOf(name);
      if (field) { field.value = params.get(name) || ""; }
    }
  }

  function load(entry) {
    const name = entry[0];
    if (state.shards.has(name)) { return Promise.resolve(state.shards.get(name)); }
    if (!state.loading.has(name)) {
      state.loading.set(name, new Promise(resolve => {
        const script = document.createElement("script");
        script.src = root + "filter/" + name;
        script.addEventListener("load", () => resolve(state.shards.get(name)));
        script.addEventListener("error", () => resolve(null));
        document.head.appendChild(script);
      }));
    }
    return state.loading.get(name);
  }

  function hexOf(binary, start) {
    let hex = "";
    for (let at = start; at < start + 16; at += 1) { hex += binary.charCodeAt(at).toString(16).padStart(2, "0"); }
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /* A shard's columns turned into its runs (newest first). */
  function unpack(record) {
    const count = record.d.length;
    const binary = record.u !== undefined ? atob(record.u) : null;
    const runs = new Array(count);
    let start = record.t ? record.t[0] : null;
    for (let at = 0; at < count; at += 1) {
      if (record.t && at > 0) { start -= record.t[at]; }
      const id = binary !== null ? hexOf(binary, 16 * at) : record.r[at];
      runs[at] = {
        id, lower: id.toLowerCase(), slug: (record.g && record.g[at]) || id, start, duration: record.d[at],
        steps: record.n[at], calls: record.c[at], ok: record.k[at], failed: record.f[at], cancelled: record.x[at],
        servers: record.S[record.s[at]], tools: record.T[record.w[at]],
        status: record.o ? (record.o[at] < 0 ? -2 : record.O[record.o[at]][0]) : -2,
        reason: record.o && record.o[at] >= 0 ? record.O[record.o[at]][1] : -1,
        configuration: record.q ? record.q[at] : -1, cost: record.m ? record.m[at] : null,
      };
    }
    return runs;
  }

  function test(query) {
    const index = state.index;
    const position = (list, value) => (value === undefined ? -1 : list.indexOf(value));
    const server = position(index.servers, query.server);
    const tool = position(index.tools, query.tool);
    const status = position(index.statuses, query.status);
    const configuration = position(index.configurations, query.configuration);
    const prefix = (query.run || "").toLowerCase();
    const from = query.from ? zoneSeconds(query.from) : null;
    const to = query.to ? zoneSeconds(query.to) : null;
    const over = query.over !== undefined ? Number(query.over) * 1000 : null;
    const impossible = (query.server && server < 0) || (query.tool && tool < 0) ||
      (query.status && status < 0) || (query.configuration && configuration < 0);
    return run => !impossible &&
      (!prefix || run.lower.startsWith(prefix)) &&
      (server < 0 || run.servers.includes(server)) &&
      (tool < 0 || run.tools.includes(tool)) &&
      (query.outcome !== "failed" || run.failed > 0) &&
      (query.outcome !== "cancelled" || run.cancelled > 0) &&
      (status < 0 || run.status === status) &&
      (configuration < 0 || run.configuration === configuration) &&
      (from === null || (run.start !== null && run.start >= from)) &&
      (to === null || (run.start !== null && run.start <= to)) &&
      (over === null || durationMs(run.duration) > over);
  }

  const durationMs = stored => (stored < 0 ? -stored * 100 : stored / 10);

  function durationText(stored) {
    return stored < 0 ? tenths.format(-stored / 10) + words.seconds : tenths.format(stored / 10) + words.milliseconds;
  }

  function cell(row, text, number) {
    const td = row.insertCell();
    if (number) { td.className = "number"; }
    td.textContent = text;
    return td;
  }

  function statusText(run) {
    const index = state.index;
    const status = run.status >= 0 ? index.statuses[run.status] : null;
    let shown = status ? (words.statuses[status] || status) : words.unknown;
    if (run.reason >= 0) {
      const reason = index.reasons[run.reason];
      shown = fill(words.withReason, { status: shown, reason: words.reasons[reason] || reason });
    }
    return [status, shown];
  }

  function rowOf(run) {
    const row = document.createElement("tr");
    row.className = run.failed ? "run-failed" : (run.cancelled ? "run-cancelled" : "run-ok");
    const idCell = row.insertCell();
    idCell.className = "run-id";
    const link = document.createElement("a");
    link.href = "runs/" + run.slug + ".html";
    link.textContent = run.id;
    idCell.appendChild(link);
    if (run.failed) { idCell.appendChild(failedMark.content.cloneNode(true)); }
    cell(row, run.start === null ? "" : dateTime.format(new Date(run.start * 1000)));
    cell(row, durationText(run.duration), true);
    for (const value of [run.steps, run.calls, run.ok]) { cell(row, integer.format(value), true); }
    cell(row, integer.format(run.failed), true).className = run.failed ? "number cell-failed" : "number";
    cell(row, integer.format(run.cancelled), true);
    if (state.index.runsKnown) { rowCellsOfRunRow(row, run); }
    return row;
  }

  function rowCellsOfRunRow(row, run) {
    if (run.status === -2) {
      cell(row, ""); cell(row, ""); cell(row, "", true);
      return;
    }
    const [status, shown] = statusText(run);
    const badge = document.createElement("span");
    badge.className = "run-status status-" + (status || "unknown");
    badge.textContent = shown;
    row.insertCell().appendChild(badge);
    cell(row, run.configuration >= 0 ? state.index.configurations[run.configuration] : "");
    cell(row, run.cost === null ? "" : money.format(run.cost / 1e6), true);
  }

  function showMore() {
    const next = state.matches.slice(state.shown, state.shown + words.pageSize);
    const rows = document.createDocumentFragment();
    for (const run of next) { rows.appendChild(rowOf(run)); }
    body.appendChild(rows);
    state.shown += next.length;
    more.hidden = state.shown >= state.matches.length;
  }

  function announce(done, total) {
    const count = state.matches.length;
    let text = fill(count === 1 ? words.one : words.other, { num: integer.format(count) });
    if (state.shown < count) { text += " " + fill(words.shown, { shown: integer.format(state.shown) }); }
    if (done < total) {
      text = fill(words.searching, { done: integer.format(done), total: integer.format(total) }) + " " + text;
    }
    countLine.textContent = text;
  }

  /* The shards a query needs, newest first: those overlapping its time range. */
  function shardsFor(query) {
    const from = query.from ? zoneSeconds(query.from) : null;
    const to = query.to ? zoneSeconds(query.to) : null;
    const timed = from !== null || to !== null;
    return state.index.shards
      .filter(([, first, last]) => (first === -1 ? !timed : (from === null || last >= from) && (to === null || first <= to)))
      .sort((a, b) => (a[1] === -1) - (b[1] === -1) || b[2] - a[2]);
  }

  async function run() {
    const query = wanted();
    writeFragment(query);
    const number = ++state.query;
    body.replaceChildren();
    state.matches = [];
    state.shown = 0;
    more.hidden = true;
    if (Object.keys(query).length === 0) {
      region.hidden = true;
      countLine.textContent = "";
      return;
    }
    region.hidden = false;
    const matches = test(query);
    const needed = shardsFor(query);
    announce(0, needed.length);
    for (let done = 0; done < needed.length; done += 1) {
      const runs = await load(needed[done]);
      if (number !== state.query) { return; }
      for (const found of (runs || []).filter(matches)) { state.matches.push(found); }
      if (state.shown < words.pageSize) { showMore(); } else { more.hidden = false; }
      announce(done + 1, needed.length);
    }
  }

  function options(name, values, labelOf) {
    const select = fieldOf(name);
    if (!select) { return; }
    for (const value of values) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = labelOf ? labelOf(value) : value;
      select.appendChild(option);
    }
  }

  window.nrllmFilter = {
    index(index) {
      state.index = index;
      options("server", index.servers);
      options("tool", index.tools);
      options("status", index.statuses, status => words.statuses[status] || status);
      options("configuration", index.configurations);
      readFragment();
      section.hidden = false;
      form.addEventListener("input", run);
      form.addEventListener("change", run);
      form.querySelector(".filter-clear").addEventListener("click", () => {
        for (const name of FIELDS) { const field = fieldOf(name); if (field) { field.value = ""; } }
        run();
      });
      more.addEventListener("click", () => { showMore(); announce(1, 1); });
      window.addEventListener("hashchange", () => { readFragment(); run(); });
      run();
    },
    shard(number, record) {
      state.shards.set(`runs-${String(number).padStart(3, "0")}.js`, unpack(record));
    },
  };
  const script = document.createElement("script");
  script.src = root + "filter/index.js";
  document.head.appendChild(script);
}());
