// Drives the web UI's task page (master/ui/: a task's stdout and stderr,
// followed live from its agent) in headless Chromium, for
// tests/python/ui/test_ui_logs.py:
//
//   node drive_logs.cjs URL FRAMEWORK TASK WANT_STDOUT_LINES SCREENSHOT_DIR PLAYWRIGHT_CORE_DIR GO_FILE
//
// Opens the cluster page, follows the task's link, makes GO_FILE (the task
// starts writing when it exists), waits until the stdout
// pane holds WANT_STDOUT_LINES lines and records the panes' text on the way
// (how many lines each time it grew: live, not all at the end), saves
// ui-task.png and prints one JSON line. Exit 3 when Chromium cannot start,
// 1 on any other failure.
"use strict";

const [url, framework, task, wantLines, shots, playwrightDir, goFile] = process.argv.slice(2);
const { chromium } = require(playwrightDir);

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
  await page.goto(url);
  await page.waitForSelector(`#tasks tbody tr[data-task="${task}"] a`, { timeout: 30000 });
  await page.click(`#tasks tbody tr[data-task="${task}"] a`);
  require("fs").writeFileSync(goFile, "");
  const seen = [];  // stdout line counts as the pane grew
  const deadline = Date.now() + 30000;
  for (;;) {
    const n = await page.evaluate(() => document.querySelector("#task-stdout").textContent.split("\n").length - 1);
    if (!seen.length || seen[seen.length - 1] !== n) seen.push(n);
    if (n >= Number(wantLines) || Date.now() > deadline) break;
    await page.waitForTimeout(50);
  }
  const shown = await page.evaluate(() => ({
    hash: location.hash,
    id: document.querySelector("#task-id").textContent,
    info: document.querySelector("#task-info").textContent,
    image: document.querySelector("#task-image").textContent,
    stdout: document.querySelector("#task-stdout").textContent,
    stderr: document.querySelector("#task-stderr").textContent,
    error: document.querySelector("#task-stdout").dataset.error || "",
  }));
  await page.screenshot({ path: shots + "/ui-task.png", fullPage: true });
  await browser.close();
  console.log(JSON.stringify({ shown, seen, errors, framework }));
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
