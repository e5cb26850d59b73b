// Drives the master's web UI (master/ui/) in headless Chromium through
// playwright-core, for tests/python/ui/test_ui.py:
//
//   node drive.cjs URL SCREENSHOT_DIR PLAYWRIGHT_CORE_DIR
//
// Waits until the cluster page shows a RUNNING task and the share chart has
// been drawn from at least two polls, reads what the page shows (agents,
// frameworks, tasks, task states, chart pixels), saves ui.png, opens the
// agent page from the agent's link, waits for its executors' usage, saves
// ui-agent.png, and prints everything it read as one JSON line. Exit 3 when
// Chromium cannot start (the test skips with the message), 1 on any other
// failure.
"use strict";

const [url, shots, playwrightDir] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

function rows(selector) {
  return [...document.querySelectorAll(selector + " tbody tr")].map((r) => ({
    data: { ...r.dataset },
    cells: [...r.cells].map((c) => c.textContent.trim()),
  }));
}

async function main() {
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu"],
      timeout: 60000,
    });
  } catch (e) {
    console.error("chromium cannot start: " + e.message.split("\n")[0]);
    process.exit(3);
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`); });
  await page.goto(url);
  await page.waitForFunction(
    () => [...document.querySelectorAll("#tasks td.state-cell")].some((c) => c.textContent === "RUNNING") &&
          Number(document.body.dataset.polls || 0) >= 2,
    null, { timeout: 30000 });
  const cluster = await page.evaluate(`(() => {
    const rows = ${rows.toString()};
    const c = document.querySelector("#shares");
    const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let colored = 0;  // pixels of a share line (saturated colours, not the grey grid)
    for (let i = 0; i < px.length; i += 4) {
      const [r, g, b, a] = [px[i], px[i + 1], px[i + 2], px[i + 3]];
      if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 60) colored++;
    }
    return {
      summary: document.querySelector("#summary").textContent,
      agentCount: document.querySelector('[data-testid="agent-count"]').textContent,
      frameworkCount: document.querySelector('[data-testid="framework-count"]').textContent,
      taskCount: document.querySelector('[data-testid="task-count"]').textContent,
      states: [...document.querySelectorAll("#task-states [data-state]")].map((s) => s.textContent),
      agents: rows("#agents"), frameworks: rows("#frameworks"), tasks: rows("#tasks"),
      chartPixels: colored,
    };
  })()`);
  await page.screenshot({ path: shots + "/ui.png", fullPage: true });

  await page.click("#agents tbody tr a");
  await page.waitForFunction(
    () => !document.querySelector("#agent-page").hidden &&
          document.querySelectorAll("#executors tbody tr").length > 0,
    null, { timeout: 30000 });
  const agent = await page.evaluate(`(() => {
    const rows = ${rows.toString()};
    return {
      id: document.querySelector("#agent-id").textContent,
      info: document.querySelector("#agent-info").textContent,
      executors: rows("#executors"), tasks: rows("#agent-tasks"),
    };
  })()`);
  await page.screenshot({ path: shots + "/ui-agent.png", fullPage: true });
  await browser.close();
  console.log(JSON.stringify({ cluster, agent, errors }));
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
