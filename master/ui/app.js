// The allot web UI: polls GET /state every 2 s and redraws. No framework,
// no build step (docs/decisions.md).
"use strict";

const POLL_MS = 2000;
const HISTORY_MS = 10 * 60 * 1000;   // dominant shares kept for the chart
const COLORS = ["#3d7bd9", "#d9503d", "#3da35d", "#a35dd9", "#d9a13d", "#3dbcd9", "#7a8194"];
const shareHistory = new Map();      // framework id -> [[time ms, share]]
let latest = null;

const $ = (sel) => document.querySelector(sel);
const text = (v) => (v === undefined || v === null ? "" : String(v));

function scalar(list, name) {
  const r = (list || []).find((x) => x.name === name);
  return r ? r.scalar : 0;
}

function cell(row, content, cls) {
  const td = row.insertCell();
  if (content instanceof Node) td.appendChild(content); else td.textContent = text(content);
  if (cls) td.className = cls;
  return td;
}

function bar(used, total, unit) {
  const wrap = document.createElement("span");
  const b = document.createElement("span");
  b.className = "bar";
  const fill = document.createElement("span");
  fill.style.width = (total > 0 ? Math.min(100, (100 * used) / total) : 0) + "%";
  b.appendChild(fill);
  const label = document.createElement("small");
  label.textContent = `${+used.toFixed(2)} / ${+total.toFixed(2)}${unit}`;
  wrap.append(b, label);
  return wrap;
}

function link(href, label) {
  const a = document.createElement("a");
  a.href = href;
  a.textContent = label;
  return a;
}

function fillBody(table, rows, fn) {
  const body = $(table).tBodies[0];
  body.replaceChildren();
  for (const r of rows) fn(body.insertRow(), r);
}

function colorOf(id) {
  const ids = [...shareHistory.keys()].sort();
  return COLORS[Math.max(0, ids.indexOf(id)) % COLORS.length];
}

function renderCluster(m) {
  const agents = m.agents || [], frameworks = m.frameworks || [], tasks = m.tasks || [];
  $('[data-testid="agent-count"]').textContent = `(${agents.length})`;
  $('[data-testid="framework-count"]').textContent = `(${frameworks.length})`;
  $('[data-testid="task-count"]').textContent = `(${tasks.length})`;
  fillBody("#agents", agents, (row, a) => {
    row.dataset.agent = a.id;
    cell(row, link(`#/agent/${encodeURIComponent(a.id)}`, a.id));
    cell(row, a.hostname);
    cell(row, bar(scalar(a.used, "cpus"), scalar(a.total, "cpus"), ""));
    cell(row, bar(scalar(a.used, "mem"), scalar(a.total, "mem"), " MiB"));
    cell(row, a.taskCount);
    cell(row, a.draining ? "draining" : a.connected ? "connected" : "disconnected");
    cell(row, a.shard || "direct");
  });
  fillBody("#frameworks", frameworks, (row, f) => {
    row.dataset.framework = f.id;
    const sw = document.createElement("span");
    sw.className = "swatch";
    sw.style.background = colorOf(f.id);
    cell(row, sw);
    cell(row, f.id);
    cell(row, f.name);
    cell(row, f.weight);
    cell(row, (100 * f.dominantShare).toFixed(1) + "%", "share");
    cell(row, f.taskCount);
    cell(row, f.offerCount);
  });
  const byState = {};
  for (const t of tasks) byState[t.state] = (byState[t.state] || 0) + 1;
  const states = $('[data-testid="task-states"]');
  states.replaceChildren();
  for (const [state, n] of Object.entries(byState).sort()) {
    const s = document.createElement("span");
    s.className = "state " + state;
    s.dataset.state = state;
    s.textContent = `${state.replace("TASK_", "")}: ${n}`;
    states.appendChild(s);
  }
  fillBody("#tasks", tasks, (row, t) => {
    row.dataset.task = t.taskId;
    cell(row, link(`#/task/${encodeURIComponent(t.frameworkId)}/${encodeURIComponent(t.taskId)}`, t.taskId));
    cell(row, t.frameworkId);
    cell(row, link(`#/agent/${encodeURIComponent(t.agentId)}`, t.agentId));
    cell(row, t.state.replace("TASK_", ""), "state-cell");
    cell(row, healthText(t), healthClass(t));
    cell(row, t.reason === "REASON_NONE" ? "" : t.reason.replace("REASON_", ""));
    cell(row, t.message, "message");
  });
  drawShares();
}

function recordShares(m, now) {
  for (const f of m.frameworks || []) {
    if (!shareHistory.has(f.id)) shareHistory.set(f.id, []);
    shareHistory.get(f.id).push([now, f.dominantShare]);
  }
  for (const [id, points] of shareHistory) {
    while (points.length && points[0][0] < now - HISTORY_MS) points.shift();
    if (!points.length) shareHistory.delete(id);
  }
}

function drawShares() {
  const c = $("#shares"), g = c.getContext("2d");
  const w = c.width, h = c.height, pad = 28, now = Date.now();
  g.clearRect(0, 0, w, h);
  g.strokeStyle = "#e3e6eb";
  g.fillStyle = "#7a8194";
  g.font = "11px system-ui";
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    const y = h - pad / 2 - v * (h - pad);
    g.beginPath(); g.moveTo(pad, y); g.lineTo(w, y); g.stroke();
    g.fillText(v * 100 + "%", 0, y + 4);
  }
  g.fillText("dominant share, last 10 minutes", pad + 4, 12);
  const x = (t) => pad + ((t - (now - HISTORY_MS)) / HISTORY_MS) * (w - pad);
  for (const [id, points] of shareHistory) {
    g.strokeStyle = colorOf(id);
    g.lineWidth = 2;
    g.beginPath();
    points.forEach(([t, s], i) => {
      const y = h - pad / 2 - Math.min(1, s) * (h - pad);
      if (i === 0) g.moveTo(x(t), y); else g.lineTo(x(t), y);
    });
    g.stroke();
  }
}

function renderAgent(m, id) {
  const a = (m.agents || []).find((x) => x.id === id);
  $("#agent-id").textContent = id;
  $("#agent-info").textContent = a
    ? `${a.hostname} · ${a.connected ? "connected" : "disconnected"}${a.draining ? " · draining" : ""}` +
      ` · cpus ${scalar(a.used, "cpus")} / ${scalar(a.total, "cpus")}` +
      ` · mem ${scalar(a.used, "mem")} / ${scalar(a.total, "mem")} MiB`
    : "unknown agent";
  const mib = (b) => (Number(b || 0) / 1048576).toFixed(1) + " MiB";
  fillBody("#executors", a ? a.usage || [] : [], (row, u) => {
    row.dataset.executor = u.executorId;
    cell(row, u.frameworkId);
    cell(row, u.executorId);
    cell(row, (u.usage.cpuTimeS || 0).toFixed(2));
    cell(row, mib(u.usage.memBytes));
    cell(row, mib(u.usage.memPeakBytes));
    cell(row, u.usage.processes || 0);
  });
  fillBody("#agent-tasks", (m.tasks || []).filter((t) => t.agentId === id), (row, t) => {
    cell(row, t.taskId);
    cell(row, t.frameworkId);
    cell(row, t.state.replace("TASK_", ""));
    cell(row, healthText(t), healthClass(t));
    cell(row, t.reason === "REASON_NONE" ? "" : t.reason.replace("REASON_", ""));
  });
}

// A task's stdout and stderr, live: the browser follows them from the
// task's agent (its files API, agent/files_api.h; the agent answers
// cross-origin reads), answer after answer, until the task ended. Each pane
// keeps the last LOG_KEEP_BYTES characters.
const LOG_KEEP_BYTES = 1 << 20;
let logView = null;  // {key, streams: [{stop}]}

function findTask(m, fw, id) {
  return [...(m.tasks || []), ...(m.completedTasks || [])].find((t) => t.frameworkId === fw && t.taskId === id);
}

function followStream(agentUrl, fw, id, stream, pane, ended) {
  const state = { stopped: false, offset: 0, file: "" };
  const decoder = new TextDecoder();
  const append = (s) => {
    pane.textContent = (pane.textContent + s).slice(-LOG_KEEP_BYTES);
    pane.dataset.bytes = String(Number(pane.dataset.bytes || 0) + s.length);
  };
  (async () => {
    for (;;) {
      const wasEnded = ended();
      const q = `framework=${encodeURIComponent(fw)}&task=${encodeURIComponent(id)}&stream=${stream}` +
        `&offset=${state.offset}` + (state.file ? `&file=${encodeURIComponent(state.file)}` : "");
      try {
        const res = await fetch(`${agentUrl}/files/follow?${q}`, { cache: "no-store" });
        if (!res.ok) { pane.dataset.error = `${res.status} ${await res.text()}`; return; }
        state.file = res.headers.get("X-Allot-File") || "";
        state.offset = Number(res.headers.get("X-Allot-Offset") || 0);
        const reader = res.body.getReader();
        let got = 0;
        for (;;) {
          const { value, done } = await reader.read();
          if (done || state.stopped) break;
          state.offset += value.length;
          got += value.length;
          append(decoder.decode(value, { stream: true }));
        }
        // An empty answer: the task ended and the master has not said so yet.
        if (!got) await new Promise((r) => setTimeout(r, 500));
      } catch (e) {
        pane.dataset.error = e.message;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      if (state.stopped) return;
      if (wasEnded) { pane.dataset.ended = "true"; return; }
    }
  })();
  return { stop: () => { state.stopped = true; } };
}

function renderTask(m, fw, id) {
  const key = fw + "\n" + id;
  const t = findTask(m, fw, id);
  $("#task-id").textContent = id;
  const agent = t && (m.agents || []).find((a) => a.id === t.agentId);
  $("#task-info").textContent = t
    ? `${t.state.replace("TASK_", "")} on ${agent ? agent.hostname : t.agentId} · framework ${fw}` : "unknown task";
  $("#task-image").textContent = t && t.image ? `image ${t.image}` : "the node's filesystem";
  if (logView && logView.key === key) return;
  if (logView) logView.streams.forEach((s) => s.stop());
  logView = null;
  for (const s of ["stdout", "stderr"]) { const p = $(`#task-${s}`); p.textContent = ""; delete p.dataset.ended; }
  if (!t || !agent || !agent.httpAddress) {
    $("#task-info").textContent += " · its agent serves no HTTP endpoint";
    return;
  }
  const agentUrl = `${location.protocol}//${agent.httpAddress}`;
  const ended = () => {
    const now = latest && findTask(latest.master || {}, fw, id);
    return !now || !["TASK_STAGING", "TASK_STARTING", "TASK_RUNNING", "TASK_KILLING"].includes(now.state);
  };
  logView = { key, streams: ["stdout", "stderr"].map((s) => followStream(agentUrl, fw, id, s, $(`#task-${s}`), ended)) };
}

// A task's health check verdict (absent: no check, or no verdict yet).
function healthText(t) {
  if (t.healthy === undefined) return "";
  return t.healthy ? "healthy" : "unhealthy";
}

function healthClass(t) {
  if (t.healthy === undefined) return "health-cell";
  return t.healthy ? "health-cell healthy" : "health-cell unhealthy";
}

function render() {
  if (!latest) return;
  const m = latest.master || {};
  $("#summary").textContent =
    `master ${m.masterId} · ${(m.agents || []).length} agents · ` +
    `${(m.frameworks || []).length} frameworks · ${(m.tasks || []).length} tasks`;
  const route = location.hash.match(/^#\/agent\/(.+)$/);
  const task = location.hash.match(/^#\/task\/([^/]+)\/(.+)$/);
  $("#cluster").hidden = !!(route || task);
  $("#agent-page").hidden = !route;
  $("#task-page").hidden = !task;
  if (!task && logView) { logView.streams.forEach((s) => s.stop()); logView = null; }
  if (route) renderAgent(m, decodeURIComponent(route[1]));
  else if (task) renderTask(m, decodeURIComponent(task[1]), decodeURIComponent(task[2]));
  else renderCluster(m);
}

async function poll() {
  try {
    const res = await fetch("/state", { cache: "no-store" });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    latest = await res.json();
    recordShares(latest.master || {}, Date.now());
    $("#updated").textContent = "updated " + new Date().toLocaleTimeString();
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
    render();
  } catch (e) {
    $("#updated").textContent = "cannot reach the master: " + e.message;
  }
  setTimeout(poll, POLL_MS);
}

window.addEventListener("hashchange", render);
poll();
