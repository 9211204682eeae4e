// The app's end-to-end steps: headless Chromium (Debian's, through
// playwright-core) opens the app's dev server, whose websocket bridge
// reaches the real Go bindings and events, and uses the app through its
// data-testids. TestAppE2E (e2e_test.go) prepares everything and runs
//
//	node e2e.mjs CONFIG.json
//
// Each step saves a screenshot (its path on a "screenshot:" line); a
// failed step saves one too, the next steps still run, and the exit status
// is 1. Bindings are called directly only to set up (the memory budget)
// and to check what the UI cannot show (that nothing was stored).
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const fx = cfg.fixtures;
const started = Date.now();
const deadline = started + cfg.timeoutMs;

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  args: ['--no-sandbox', '--disable-gpu'],
});
// The popover's size.
const context = await browser.newContext({ viewport: { width: 420, height: 640 }, deviceScaleFactor: 1 });
let page = await context.newPage();
page.setDefaultTimeout(15_000);
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
let appURL = cfg.url;

// ---- helpers

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const tid = (id) => page.getByTestId(id);
const within = (loc, id) => loc.getByTestId(id);

class StepError extends Error {}
/** check ends the step when cond is false. */
function check(cond, msg) {
  if (!cond) throw new StepError(msg);
}
/** soft notes a failure and lets the step go on; the step fails at its end. */
let problems = [];
function soft(cond, msg) {
  if (!cond) problems.push(msg);
  return cond;
}

/** poll calls fn until it returns something truthy, or fails with what. */
async function poll(fn, what, timeoutMs = 15_000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      throw new StepError(`timed out after ${timeoutMs / 1000}s waiting for ${what}` + (last instanceof Error ? ` (${last.message.split('\n')[0]})` : ''));
    }
    await sleep(everyMs);
  }
}

/** bind calls a bound Go method: {ok, value} or {ok: false, error}. */
async function bind(method, ...args) {
  return page.evaluate(
    async ({ method, args }) => {
      try {
        return { ok: true, value: await window.go.desktop.App[method](...args) };
      } catch (e) {
        return { ok: false, error: String(e && e.message ? e.message : e) };
      }
    },
    { method, args },
  );
}
async function bindOK(method, ...args) {
  const r = await bind(method, ...args);
  check(r.ok, `${method}: ${r.error}`);
  return r.value;
}

async function openApp(url) {
  await page.goto(url);
  await page.waitForFunction(() => window.go && window.go.desktop && window.go.desktop.App && window.runtime, null, { timeout: 30_000 });
}

async function ready(what = 'a loaded model') {
  return poll(async () => {
    const s = await bindOK('Status');
    check(s.state !== 'error', `the engine reports an error: ${s.error}`);
    return s.state === 'ready' && s.model ? s : null;
  }, what, 60_000, 250);
}

async function tab(name) {
  await tid(`tab-${name}`).click();
}

/** appOutput is everything the app printed on stdout and stderr so far. */
async function appOutput() {
  const r = await fetch(`${cfg.ctl}/ctl/output`);
  return r.text();
}
async function dialogLines() {
  return (await appOutput()).split('\n').filter((l) => l.startsWith('dialog: '));
}
async function fileRequests() {
  return (await fetch(`${cfg.ctl}/ctl/requests`)).json();
}

const modelRow = (p) => page.locator(`[data-testid="local-model"][data-path="${p}"]`);
const catalogEntry = (id) => page.locator(`[data-testid="catalog-entry"][data-id="${id}"]`);

async function text(loc) {
  return ((await loc.innerText()) || '').trim();
}
async function count(loc) {
  return loc.count();
}
async function visible(loc) {
  return (await loc.count()) > 0 && (await loc.first().isVisible());
}

async function progressValue(loc) {
  return loc.evaluate((el) => {
    const v = el.getAttribute('aria-valuenow') ?? (el.value !== undefined ? String(el.value) : null);
    const max = el.getAttribute('aria-valuemax') ?? (el.max !== undefined ? String(el.max) : '100');
    return v === null ? null : Number(v) / Number(max || 100);
  });
}

/** Sends prompt through the prompt box and returns the new assistant message. */
async function sendPrompt(prompt) {
  const before = await count(page.locator('[data-testid="message"][data-role="assistant"]'));
  await tid('prompt-input').fill(prompt);
  await tid('send-button').click();
  const msg = page.locator('[data-testid="message"][data-role="assistant"]').nth(before);
  await msg.waitFor({ state: 'attached', timeout: 15_000 });
  return msg;
}

/**
 * watchReply records, in the page, every state and text length of the
 * assistant message at index n, so a step can tell text streamed in pieces
 * from text that appeared at once; with stopAfterText it also clicks Stop
 * the moment the first text shows (a reply of a small model can end in a
 * fraction of a second, too soon for a round trip from here).
 */
async function watchReply(n, { stopAfterText = false } = {}) {
  await page.evaluate(
    ({ n, stopAfterText }) => {
      const seen = (window.__e2eSeen = []);
      let clicked = false;
      const look = () => {
        const m = document.querySelectorAll('[data-testid="message"][data-role="assistant"]')[n];
        if (!m) return;
        const state = m.getAttribute('data-state');
        const len = (m.innerText || '').trim().length;
        const last = seen[seen.length - 1];
        if (!last || last.state !== state || last.len !== len) seen.push({ state, len, t: performance.now() });
        const body = m.querySelector('[data-testid="markdown"]') || m;
        if (stopAfterText && !clicked && state === 'streaming' && body.innerText.trim()) {
          const stop = document.querySelector('[data-testid="stop-button"]');
          if (stop) {
            clicked = true;
            window.__e2eStopClickedAt = len;
            stop.click();
          }
        }
      };
      window.__e2eObserver?.disconnect();
      window.__e2eObserver = new MutationObserver(look);
      window.__e2eObserver.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
      look();
    },
    { n, stopAfterText },
  );
}
const replySeen = () => page.evaluate(() => window.__e2eSeen || []);

async function waitState(msg, states, timeoutMs = 60_000) {
  const want = [].concat(states);
  return poll(async () => {
    const s = await msg.getAttribute('data-state');
    return want.includes(s) ? s : null;
  }, `the reply to end as ${want.join(' or ')}`, timeoutMs, 100);
}

// ---- steps

const results = [];
let stepNo = 0;
let current = '';

async function shot(name) {
  const file = path.join(cfg.shots, `${name}.png`);
  await page.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
  return file;
}

/** extraShot saves a screenshot in the middle of the current step. */
const extraShot = (suffix) => shot(`${current}-${suffix}`);

async function step(name, fn, timeoutMs = 60_000) {
  stepNo++;
  current = `${String(stepNo).padStart(2, '0')}-${name}`;
  const t0 = Date.now();
  const errorsBefore = pageErrors.length;
  problems = [];
  if (Date.now() > deadline) {
    results.push({ id: current, ok: false, error: 'not run: the run is out of time' });
    console.log(`FAIL ${current}: not run, the run is out of time`);
    return false;
  }
  let error;
  try {
    let timer;
    await Promise.race([
      fn(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new StepError(`the step took longer than ${timeoutMs / 1000}s`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    const newErrors = pageErrors.slice(errorsBefore);
    check(newErrors.length === 0, `uncaught errors in the page: ${newErrors.join('; ')}`);
    check(problems.length === 0, problems.join('; '));
  } catch (e) {
    const msg = e instanceof StepError ? e.message : String(e && e.stack ? e.stack : e);
    error = problems.includes(msg) || problems.join('; ') === msg ? msg : [...problems, msg].join('; ');
  }
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  try {
    await shot(error ? `${current}-FAILED` : current);
  } catch (e) {
    console.log(`(no screenshot: ${e.message})`);
  }
  results.push({ id: current, ok: !error, error, secs });
  console.log(error ? `FAIL ${current} (${secs}s): ${error}` : `PASS ${current} (${secs}s)`);
  return !error;
}

const state = {}; // what later steps need from earlier ones

/** setMemoryLimitMiB types a memory limit in MiB in Settings, saves it and returns the bytes saved. */
async function setMemoryLimitMiB(mib) {
  await tab('settings');
  await tid('settings-form').waitFor();
  await tid('setting-memory-unit').selectOption('MiB');
  await tid('setting-memory-limit').fill(String(mib));
  await tid('settings-save').click();
  await tid('settings-saved').waitFor();
  return (await bindOK('Settings')).memoryLimit;
}

/** adviceMaxima are the largest contexts the panel's advice names, by KV type, as the service words them. */
function adviceMaxima(advice) {
  const ways = [
    [/([\d,]+) tokens(?: \([^)]*\))? is the largest that fits with (q4|q8|f16) KV/, 1, 2],
    [/with (q4|q8|f16) KV the largest context that fits is ([\d,]+) tokens/i, 2, 1],
    [/store the KV cache as (q4|q8|f16):.* its largest context is ([\d,]+) tokens/i, 2, 1],
  ];
  const out = {};
  for (const a of advice) {
    for (const [re, num, kv] of ways) {
      const m = re.exec(a);
      if (m) out[m[kv]] = Number(m[num].replace(/,/g, ''));
    }
  }
  return out;
}

await step('demo-model-ready', async () => {
  await openApp(appURL);
  const s = await ready('the demo model to load at start-up');
  check(s.model.demo, `the model loaded at start-up is not the demo model: ${JSON.stringify(s.model)}`);
  state.demoPath = s.model.path;
  await tid('demo-badge').waitFor();
  const note = await text(tid('demo-note'));
  check(/random weights/i.test(note), `the demo note does not say the weights are random: "${note}"`);
  const name = await text(tid('model-name'));
  check(/demo/i.test(name), `the header names the model "${name}", not the demo model`);

  // Setup: a memory budget small enough that "past the budget" and "will
  // not fit" happen on any machine. The app's own estimates choose it: the
  // demo and the chat model fit with room to spare, the chat model at its
  // full trained context does not, nor does the big model at all.
  const est = async (p, ctx) => (await bindOK('CheckLoad', { path: p, ctx, kv: 'q4' })).total;
  const demo = await est(state.demoPath, 4096);
  const long = await est(fx.long, 4096);
  const longMax = await est(fx.long, fx.longCtx);
  const want = Math.ceil(Math.max(demo, long) / 0.8 / 1048576) * 1048576;
  // Set as a person would, in MiB in Settings.
  const budget = await setMemoryLimitMiB(want / 1048576);
  check(budget === want, `the saved memory limit is ${budget} bytes, want ${want} (${want / 1048576} MiB typed)`);
  check(longMax > budget * 1.1, `the chat model at ${fx.longCtx} tokens needs ${longMax} bytes, not clearly more than the budget ${budget}`);
  check(fx.bigBytes > budget, `the big model (${fx.bigBytes} bytes) is not bigger than the budget ${budget}`);
  state.budget = budget;
  await tab('chat');
  console.log(`  memory budget ${(budget / 1048576).toFixed(0)} MiB (demo ${(demo / 1048576).toFixed(1)} MiB, chat model ${(long / 1048576).toFixed(1)} MiB, at ${fx.longCtx} tokens ${(longMax / 1048576).toFixed(1)} MiB)`);
});

await step('prompt-streams', async () => {
  await tab('chat');
  state.firstPrompt = 'Write a haiku about a tiny kettle';
  const n = await count(page.locator('[data-testid="message"][data-role="assistant"]'));
  await watchReply(n);
  await page.evaluate(() => {
    window.__e2eDeltas = 0;
    window.runtime.EventsOn('chat:delta', () => window.__e2eDeltas++);
  });
  const msg = await sendPrompt(state.firstPrompt);
  const user = page.locator('[data-testid="message"][data-role="user"]').last();
  check((await text(user)).includes(state.firstPrompt), 'the prompt is not shown as the user message');
  await waitState(msg, 'done');
  const reply = await text(within(msg, 'markdown'));
  check(reply.length > 0, 'the reply is empty');
  const seen = await replySeen();
  const streamed = seen.filter((s) => s.state === 'streaming' && s.len > 0).map((s) => s.len);
  check(new Set(streamed).size >= 2, `the text did not grow while streaming (states and lengths seen: ${JSON.stringify(seen.slice(0, 12))})`);
  const d = await page.evaluate(() => window.__e2eDeltas);
  check(d >= 2, `only ${d} chat:delta events`);
  await within(msg, 'message-stats').waitFor();
  const ttft = await text(within(msg, 'ttft'));
  const tps = await text(within(msg, 'tok-per-sec'));
  check(/\d/.test(ttft) && /\d/.test(tps), `the stats show no numbers: ttft "${ttft}", tok/s "${tps}"`);
  console.log(`  ${reply.length} characters in ${d} deltas; ${ttft}; ${tps}`);
});

await step('empty-prompt', async () => {
  await tab('chat');
  const before = await count(tid('message'));
  const convs = (await bindOK('Conversations', '')).length;
  await tid('prompt-input').fill('   ');
  await tid('prompt-input').press('Enter');
  if (!(await visible(tid('prompt-error'))) && (await tid('send-button').isEnabled())) {
    await tid('send-button').click();
  }
  await tid('prompt-error').waitFor({ timeout: 5_000 });
  const msg = await text(tid('prompt-error'));
  check(/empty|type|write|enter/i.test(msg), `the prompt error does not say what is wrong: "${msg}"`);
  await sleep(500);
  check((await count(tid('message'))) === before, 'a message was added for an empty prompt');
  check((await bindOK('Conversations', '')).length === convs, 'an empty prompt was stored in the history');
});

// ---- the window's Escape, and the replies: copy, reuse, regenerate, edit, the reply limit

/** windowState is what the X server says of the app's window. */
async function windowState() {
  const r = await fetch(`${cfg.ctl}/ctl/window`);
  const body = await r.text();
  check(r.ok, `the window's state: ${body}`);
  return JSON.parse(body);
}

/** currentConversation is the newest kept conversation, whole. */
async function currentConversation() {
  const [newest] = await bindOK('Conversations', '');
  check(newest, 'no conversation is kept');
  return bindOK('Conversation', newest.id);
}

const replyText = (msg) => text(within(msg, 'markdown'));

await step('escape-keeps-window-on-linux', async () => {
  await tab('chat');
  const before = await windowState();
  check(before.windows > 0 && before.viewable, `the app's window is not on screen before Escape: ${JSON.stringify(before)}`);
  check((await bindOK('CanHideWindow')) === false, 'the Linux window says it may hide, with no tray item to bring it back');
  await tid('prompt-input').click();
  await page.keyboard.press('Escape');
  await bindOK('HideWindow'); // what Escape used to call: the Go side refuses too
  await sleep(500);
  const after = await windowState();
  check(after.viewable, `the window left the screen after Escape: ${JSON.stringify(after)}`);
  // The page is still there and answers.
  await tid('prompt-input').fill('still here');
  check((await tid('prompt-input').inputValue()) === 'still here', 'the prompt box does not take typing after Escape');
  await tid('prompt-input').fill('');
  await tab('settings');
  await tid('settings-form').waitFor();
  await tab('chat');
  await tid('prompt-input').waitFor();
  console.log(`  window ${after.states.join(', ')} after Escape`);
});

await step('reply-copy-and-reuse', async () => {
  await tab('chat');
  const replies = page.locator('[data-testid="message"][data-role="assistant"]');
  check((await count(replies)) >= 1, 'no earlier reply to follow up');
  await tid('reply-limit').fill('24'); // short replies for the steps that follow
  // The first follow-up reuses little: a reply's tokens as generated are
  // not always the tokens its text reads as. The next one finds the whole
  // conversation before the last reply in the cache.
  let msg = await sendPrompt('And one about a teapot');
  await waitState(msg, 'done');
  msg = await sendPrompt('And one about a copper teapot');
  await waitState(msg, 'done');
  const reuse = await text(within(msg, 'reuse'));
  const m = /^reused ([\d,]+) of ([\d,]+) prompt tokens$/.exec(reuse);
  check(m, `the follow-up's stats show no reuse: "${reuse}"`);
  const reused = Number(m[1].replaceAll(',', ''));
  const total = Number(m[2].replaceAll(',', ''));
  check(reused > 0 && reused < total, `reused ${reused} of ${total}: a follow-up reuses the conversation before it and computes its own question`);
  // Copy puts the reply's text, as kept, on the app's clipboard.
  await within(msg, 'copy-reply').click();
  await poll(async () => (await text(within(msg, 'copy-reply'))) === 'Copied', 'Copy to say Copied', 5_000);
  const conv = await currentConversation();
  const kept = conv.messages[conv.messages.length - 1].content;
  const clip = await page.evaluate(() => window.runtime.ClipboardGetText());
  // The system clipboard keeps line breaks but may rewrite a lone CR as LF (GTK does).
  const lines = (s) => s.replace(/\r\n?/g, '\n');
  check(kept.length > 0 && lines(clip) === lines(kept), `the clipboard holds ${JSON.stringify(clip.slice(0, 60))}, not the reply ${JSON.stringify(kept.slice(0, 60))}`);
  console.log(`  ${reuse}; copied ${clip.length} characters`);
});

await step('regenerate-and-edit', async () => {
  const replies = page.locator('[data-testid="message"][data-role="assistant"]');
  const users = page.locator('[data-testid="message"][data-role="user"]');
  const nReplies = await count(replies);
  const nUsers = await count(users);
  const before = await currentConversation();
  const oldReply = before.messages[before.messages.length - 1].content;
  const last = replies.nth(nReplies - 1);
  const oldShown = await replyText(last);
  check((await count(tid('regenerate'))) === 1 && (await count(within(last, 'regenerate'))) === 1, 'Regenerate is not offered on the last reply alone');
  check((await count(tid('edit-question'))) === 1 && (await count(within(users.last(), 'edit-question'))) === 1, 'Edit is not offered on the last question alone');

  await tid('regenerate').click();
  await poll(async () => (await last.getAttribute('data-state')) === 'done' && (await replyText(last)) !== oldShown, 'a new reply in place of the old one', 30_000);
  check((await count(replies)) === nReplies && (await count(users)) === nUsers, 'regenerating added turns instead of replacing the reply');
  const regen = await poll(async () => {
    const c = await bindOK('Conversation', before.id);
    const r = c.messages[c.messages.length - 1];
    return c.messages.length === before.messages.length && r.role === 'assistant' && r.content !== oldReply ? c : null;
  }, 'the history to hold the new reply in place of the old one');
  check(regen.messages[regen.messages.length - 2].content === before.messages[before.messages.length - 2].content, 'the question changed when its reply was regenerated');
  await extraShot('regenerated');

  const edited = 'And one about a silver kettle, please';
  await tid('edit-question').click();
  await tid('edit-input').fill(edited);
  await tid('edit-send').click();
  await poll(async () => (await text(users.last())).includes(edited) && (await replies.last().getAttribute('data-state')) === 'done', 'the edited question answered', 30_000);
  check((await count(replies)) === nReplies && (await count(users)) === nUsers, 'editing added turns instead of replacing the exchange');
  const after = await poll(async () => {
    const c = await bindOK('Conversation', before.id);
    return c.messages.length === before.messages.length && c.messages[c.messages.length - 2].content === edited ? c : null;
  }, 'the history to hold the edited question in place of the old one');
  check(after.messages[after.messages.length - 1].role === 'assistant' && after.messages[after.messages.length - 1].content.length > 0, 'the edited question has no kept reply');
  const found = await bindOK('Conversations', 'copper teapot');
  check(!found.some((c) => c.id === before.id), 'the replaced question is still found in History');
  console.log(`  ${after.messages.length} messages kept, before and after`);
});

await step('max-reply-length', async () => {
  await tab('chat');
  await tid('new-chat').click();
  check((await tid('reply-limit').inputValue()) === '', "New chat kept the last chat's reply limit");
  await tid('reply-limit').fill('8');
  const prompt = 'Describe every lighthouse on the coast, in detail';
  let msg = await sendPrompt(prompt);
  await waitState(msg, 'done');
  check((await text(within(msg, 'gen-tokens'))) === '8 tokens', `the reply has ${await text(within(msg, 'gen-tokens'))}, want 8`);
  const note = await text(within(msg, 'length-note'));
  check(note === 'stopped at the 8-token limit', `the reply says "${note}", not that it stopped at the limit`);
  const conv = await currentConversation();
  const stats = conv.messages[conv.messages.length - 1].stats;
  check(stats && stats.finishReason === 'length' && stats.genTokens === 8, `kept stats ${JSON.stringify(stats)}`);
  await extraShot('chat-limit');

  // The Settings' limit, where the chat sets none.
  const saved = await bindOK('Settings');
  check(saved.maxReplyTokens === 2048, `the default longest reply is ${saved.maxReplyTokens}, want 2048`);
  await tab('settings');
  await tid('setting-max-reply').fill('12');
  await tid('settings-save').click();
  await tid('settings-saved').waitFor();
  await tab('chat');
  await tid('new-chat').click();
  check((await tid('reply-limit').getAttribute('placeholder')) === '12', `the chat's limit field does not show the Settings' 12`);
  msg = await sendPrompt(prompt);
  await waitState(msg, 'done');
  const note2 = await text(within(msg, 'length-note'));
  check(note2 === 'stopped at the 12-token limit', `with the Settings' limit the reply says "${note2}"`);
  await tab('settings');
  await tid('setting-max-reply').fill('2048');
  await tid('settings-save').click();
  await tid('settings-saved').waitFor();
  check((await bindOK('Settings')).maxReplyTokens === 2048, 'the longest reply was not set back to 2048');
  await tab('chat');
  console.log(`  ${note}; ${note2}`);
});

await step('load-chat-model', async () => {
  await tab('models');
  await tid('local-models').waitFor();
  const dialogsBefore = (await dialogLines()).length;
  const row = modelRow(fx.long);
  await row.waitFor();
  await within(row, 'load-model').click();
  await poll(async () => (await row.getAttribute('data-loaded')) === 'true', 'the chat model to show as loaded', 60_000);
  const s = await ready('the chat model');
  check(s.model.path === fx.long, `the loaded model is ${s.model.path}`);
  check(!(await visible(tid('demo-badge'))), 'the demo badge still shows');
  const demoRow = modelRow(state.demoPath);
  if (await demoRow.count()) check((await demoRow.getAttribute('data-loaded')) === 'false', 'the demo model still shows as loaded');
  const asked = (await dialogLines()).slice(dialogsBefore);
  check(asked.length === 0, `a model that fits asked first: ${asked.join(' | ')}`);

  // KV auto: the KV check runs in the background, and the model's info
  // shows its figures, choice and reason (and a switch to q8 if it made one).
  // A choice other than q4 ends with a note: switched, or why not.
  const settled = (k) => k?.state === 'failed' || (k?.state === 'done' && (k.chosen?.startsWith('q4') || k.note));
  await poll(async () => settled((await bindOK('Status')).model?.kvCheck), 'the KV check to end', 60_000);
  const { kvCheck: k, kvLabel } = (await bindOK('Status')).model;
  check(k.state === 'done' && k.rows?.length === 3 && k.reason, `the KV check: ${JSON.stringify(k)}`);
  await tid('kv-check-table').waitFor();
  check((await count(tid('kv-check-row'))) === 3, 'the KV check does not show its three modes');
  if (k.note) await tid('kv-check-note').waitFor();
  await poll(async () => (await text(tid('model-meta'))).trim().startsWith(`${kvLabel} · `), `the header to name the cache "${kvLabel}"`);
  const meta = await text(tid('model-meta'));
  check(/^(q4 KV \(rotated\)|q4 KV|q8 KV) · /.test(meta.trim()), `the header says "${meta}"`);
  console.log(`  KV check: ${k.summary}${k.note ? ` / ${k.note}` : ''}; header: ${meta.trim()}`);
  await tid('kv-check').scrollIntoViewIfNeeded();
  await extraShot('kv-check');
});

await step('stop-mid-reply', async () => {
  await tab('chat');
  await tid('new-chat').click();
  const n = await count(page.locator('[data-testid="message"][data-role="assistant"]'));
  await watchReply(n, { stopAfterText: true });
  const msg = await sendPrompt('Tell me a very long story about the sea');
  const end = await waitState(msg, ['stopped', 'done', 'error'], 60_000);
  const clickedAt = await page.evaluate(() => window.__e2eStopClickedAt);
  check(clickedAt !== undefined, 'Stop was never clicked: no text streamed');
  check(end === 'stopped', `the reply ended "${end}" after Stop was clicked`);
  const kept = await text(within(msg, 'markdown'));
  check(kept.length > 0, 'the stopped reply lost the text that had streamed');
  await tid('send-button').waitFor();
  check(!(await visible(tid('stop-button'))), 'the Stop button still shows after the reply stopped');
  const s = await bindOK('Status');
  check(!s.busy, 'the engine is still busy after Stop');
});

await step('context-past-budget', async () => {
  await tab('models');
  await tid('context-panel').waitFor();
  const slider = tid('ctx-slider');
  const min = Number(await slider.getAttribute('min'));
  const max = Number(await slider.getAttribute('max'));
  check(min === 2048 && max === fx.longCtx, `the slider runs ${min}..${max}, want 2048..${fx.longCtx} (the trained context)`);
  await tid('kv-select').selectOption('q4');
  await slider.fill(String(min));
  await poll(async () => ['fits', 'tight'].includes(await tid('verdict').getAttribute('data-verdict')), 'a fitting verdict at the smallest context');
  for (const id of ['budget-bar', 'bar-weights', 'bar-kv', 'bar-budget', 'budget-total', 'kv-limit-q4', 'kv-limit-q8', 'kv-limit-f16']) {
    check(await visible(tid(id)), `${id} is not shown`);
  }
  await slider.fill(String(max));
  await poll(async () => (await tid('verdict').getAttribute('data-verdict')) === 'will-not-fit', 'the verdict "will-not-fit" past the budget');
  const value = await text(tid('ctx-value'));
  check(/131|128\s*K/i.test(value.replace(/[ ,.\u202f]/g, '')) || value.includes(String(max)), `the context value shows "${value}" at the slider's end`);
  await tid('ctx-warning').waitFor();
  const advice = await tid('advice-item').allInnerTexts();
  check(advice.length >= 1 && advice.every((a) => a.trim().length > 0), `no advice past the budget: ${JSON.stringify(advice)}`);
  console.log(`  warning: ${(await text(tid('ctx-warning'))).split('\n')[0]}`);
  console.log(`  advice: ${advice.join(' | ')}`);
  await tid('ctx-warning').scrollIntoViewIfNeeded();
  await extraShot('warning');

  // Apply is off while it will not fit, and the service refuses it too,
  // keeping the context in force.
  const ctxBefore = (await bindOK('Status')).model.ctx;
  check(await tid('apply-context').isDisabled(), 'Apply is enabled while the verdict is "will not fit"');
  const refused = await bind('ApplyContext', max, 'q4');
  check(!refused.ok && /will not fit/i.test(refused.error), `applying ${max} tokens anyway: ${JSON.stringify(refused)}`);
  const after = await bindOK('Status');
  check(after.state === 'ready' && after.model.ctx === ctxBefore && after.model.path === fx.long, `after a refused apply: ${JSON.stringify(after.model)}`);

  // Back under the budget: the warning goes, and applying works.
  await slider.fill(String(min));
  await poll(async () => (await tid('verdict').getAttribute('data-verdict')) === 'fits', 'the verdict "fits" back at the smallest context');
  check(!(await visible(tid('ctx-warning'))), 'the warning still shows under the budget');
  await tid('apply-context').click();
  await poll(async () => (await bindOK('Status')).model?.ctx === min, `the context ${min} to be applied`, 30_000);
});

// --- prompt templates per model ---
/** chatPromptOf sends prompt in a new chat, stops the reply at its first text, and returns the prompt the model was given. */
async function chatPromptOf(prompt) {
  await tab('chat');
  await tid('new-chat').click();
  await watchReply(0, { stopAfterText: true });
  const msg = await sendPrompt(prompt);
  const end = await waitState(msg, ['stopped', 'done', 'error'], 60_000);
  check(end !== 'error', `the reply to "${prompt}" ended in an error: ${await text(msg)}`);
  return bindOK('LastPrompt');
}
const sameIDs = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

await step('prompt-template-override', async () => {
  const s = await ready();
  check(s.model.path === fx.long, `the loaded model is ${s.model.path}, not the chat model`);
  const question = 'Say hi';
  const before = await chatPromptOf(question);
  check(before.text.includes(`[INST] ${question} [/INST]`), `the built-in template's prompt is "${before.text}"`);

  // The editor shows where the template comes from and previews it.
  await tab('models');
  const row = modelRow(fx.long);
  await within(row, 'template-open').click();
  await within(row, 'template-panel').waitFor();
  const source = await text(tid('template-source'));
  check(/Built-in Llama 2.*no chat template/.test(source), `the template's source reads "${source}"`);
  check((await text(tid('template-preview'))).includes('[INST] <<SYS>>'), 'the preview is not the Llama 2 format');
  check((await text(tid('template-special').first())) === '<s>', 'the preview does not show BOS as a special token');

  // A custom template: the preview follows the typing; saved, the next chat's prompt ids change.
  await tid('template-mode-custom').check();
  const custom = '{% for m in messages %}### {{ m.role }}:\n{{ m.content }}\n{% endfor %}### assistant:';
  await tid('template-editor').fill(custom);
  await poll(async () => (await text(tid('template-preview'))).includes('### user:\nAnd of Italy?\n### assistant:'), 'the preview of the custom template');
  await tid('template-preview').scrollIntoViewIfNeeded();
  await extraShot('custom-preview');
  await tid('template-save').click();
  await tid('template-saved').waitFor();
  check(/Your template/.test(await text(tid('template-source'))), `after saving the source reads "${await text(tid('template-source'))}"`);
  const kept = (await bindOK('Settings')).promptTemplates?.[fx.long];
  check(kept?.mode === 'custom' && kept.source === custom, `settings keep ${JSON.stringify(kept)}`);
  const withCustom = await chatPromptOf(question);
  check(!sameIDs(withCustom.ids, before.ids), 'the prompt ids did not change with the custom template');
  check(withCustom.text === `<s>### user:\n${question}\n### assistant:`, `the custom template's prompt is ${JSON.stringify(withCustom.text)}`);
  check((await bindOK('Status')).model.template === 'custom', 'the model does not name its template custom');

  // None: the prompt is the message alone.
  await tab('models');
  await within(modelRow(fx.long), 'template-panel').waitFor();
  await tid('template-mode-none').check();
  await poll(async () => (await text(tid('template-preview'))).includes('You are a helpful assistant.\n\nWhat is the capital'), 'the plain-completion preview');
  await tid('template-save').click();
  await tid('template-saved').waitFor();
  const withNone = await chatPromptOf(question);
  check(!sameIDs(withNone.ids, withCustom.ids) && !sameIDs(withNone.ids, before.ids), 'the prompt ids did not change with "none"');
  check(withNone.text === `<s>${question}`, `the plain-completion prompt is ${JSON.stringify(withNone.text)}`);

  // A template that does not parse: a clear error with its line, and no save.
  await tab('models');
  await within(modelRow(fx.long), 'template-panel').waitFor();
  await tid('template-mode-custom').check();
  await tid('template-editor').fill('{% for m in messages %}\n{{ m.content }}');
  await tid('template-error').waitFor();
  const err = await text(tid('template-error'));
  check(/^Line 2\b.*endfor/.test(err), `the error reads "${err}"`);
  check(await tid('template-save').isDisabled(), 'a template that does not parse can be saved');
  await tid('template-error').scrollIntoViewIfNeeded();
  await extraShot('invalid');

  // Back to the model's own: later steps chat with the built-in template.
  await tid('template-mode-model').check();
  await tid('template-save').click();
  await poll(async () => /Built-in Llama 2/.test(await text(tid('template-source'))), 'the built-in template back in use');
  check(!(await bindOK('Settings')).promptTemplates?.[fx.long], 'the cleared template is still kept in the settings');
  const after = await chatPromptOf(question);
  check(sameIDs(after.ids, before.ids), 'the prompt ids after clearing differ from the built-in template\'s');
  console.log(`  prompt ids: llama2 ${before.ids.length}, custom ${withCustom.ids.length}, none ${withNone.ids.length} (${withNone.ids.join(' ')})`);
  await tab('models');
  await within(modelRow(fx.long), 'template-panel').scrollIntoViewIfNeeded();
});

// Every figure the panel offers is one computation and one Apply accepts:
// under a smaller limit, typed in MiB, each KV type's largest context in
// the limits row is the advice's, applies, and one token more is refused.
await step('fit-offers-apply', async () => {
  try {
    await offersApply();
  } finally {
    // As before: the earlier limit, and 2K with q4 in force.
    await setMemoryLimitMiB(state.budget / 1048576);
    await bind('ApplyContext', 2048, 'q4');
    await tab('models');
  }
  check((await bindOK('Settings')).memoryLimit === state.budget, 'the earlier memory limit was not restored');
});

async function offersApply() {
  const mib = state.budget / 1048576 - 2;
  check((await setMemoryLimitMiB(mib)) === mib * 1048576, `the limit typed as ${mib} MiB was not saved as ${mib * 1048576} bytes`);
  await tab('models');
  await tid('context-panel').waitFor();
  const slider = tid('ctx-slider');
  const trained = Number(await slider.getAttribute('max'));
  await tid('kv-select').selectOption('f16');
  await slider.fill(String(trained));
  await poll(async () => (await tid('verdict').getAttribute('data-verdict')) === 'will-not-fit' && (await count(tid('advice-item'))) > 0, 'f16 at the trained context to be "will not fit", with advice');
  check(await tid('apply-context').isDisabled(), 'Apply is enabled while the verdict is "will not fit"');
  const offered = {};
  for (const kv of ['q4', 'q8', 'f16']) {
    const li = tid(`kv-limit-${kv}`);
    offered[kv] = Number(await li.getAttribute('data-max-ctx'));
    const shown = await text(li);
    check(offered[kv] > 0 && offered[kv] < trained && shown.includes(`up to ${offered[kv].toLocaleString('en-US')}`), `the ${kv} limit shows "${shown}" for ${offered[kv]}`);
  }
  const advice = await tid('advice-item').allInnerTexts();
  const named = adviceMaxima(advice);
  check(Object.keys(named).length >= 2, `the advice names fewer than two largest contexts: ${advice.join(' | ')}`);
  for (const [kv, n] of Object.entries(named)) check(n === offered[kv], `the advice offers ${n} tokens with ${kv}, the limits row ${offered[kv]}`);
  console.log(`  limits ${JSON.stringify(offered)}; advice ${JSON.stringify(named)}`);
  await tid('kv-limits').scrollIntoViewIfNeeded();
  await extraShot('offers');
  for (const kv of ['f16', 'q8', 'q4']) {
    const n = offered[kv];
    await within(tid(`kv-limit-${kv}`), 'kv-limit-use').click();
    const ctxShown = await text(tid('ctx-value'));
    check(ctxShown.startsWith(`${n.toLocaleString('en-US')} tokens`) && (await tid('kv-select').inputValue()) === kv, `the ${kv} offer shows "${ctxShown}", want ${n} tokens with ${kv}`);
    await poll(async () => ['fits', 'tight'].includes(await tid('verdict').getAttribute('data-verdict')) && (await tid('apply-context').isEnabled()), `${n} tokens with ${kv} to fit and Apply to be on`);
    await tid('apply-context').click();
    await poll(async () => {
      const m = (await bindOK('Status')).model;
      return m?.ctx === n && m?.kv === kv;
    }, `${n} tokens with ${kv} to be applied`, 30_000);
    if (await visible(tid('context-error'))) check(false, `applying the offered ${n} tokens with ${kv}: ${await text(tid('context-error'))}`);
    const over = await bindOK('Estimate', n + 1, kv);
    check(over.verdict === 'will-not-fit', `${n + 1} tokens with ${kv} are "${over.verdict}", want "will-not-fit"`);
    const more = await bind('ApplyContext', n + 1, kv);
    check(!more.ok && /will not fit/i.test(more.error), `${n + 1} tokens with ${kv}, one more than offered: ${JSON.stringify(more)}`);
  }
}

await step('refuse-load-that-does-not-fit', async () => {
  await tab('models');
  const dialogsBefore = (await dialogLines()).length;
  const row = modelRow(fx.big);
  await row.waitFor();
  await within(row, 'load-model').click();
  await tid('load-error').waitFor({ timeout: 30_000 });
  const msg = await text(tid('load-error'));
  check(/will not fit/i.test(msg) && /needs/i.test(msg), `the refusal does not say it will not fit and what it needs: "${msg}"`);
  check(msg.split('\n').filter((l) => l.trim()).length >= 2, `the refusal carries no advice: "${msg}"`);
  const s = await bindOK('Status');
  check(s.state === 'ready' && s.model.path === fx.long, `the previous model is no longer loaded: ${JSON.stringify(s)}`);
  check((await row.getAttribute('data-loaded')) === 'false', 'the refused model shows as loaded');
  check((await modelRow(fx.long).getAttribute('data-loaded')) === 'true', 'the previous model no longer shows as loaded');
  // Nothing smaller fits either, so nothing was asked.
  const asked = (await dialogLines()).slice(dialogsBefore);
  check(asked.length === 0, `a load that fits at no context asked: ${asked.join(' | ')}`);
  console.log(`  ${msg.replace(/\n/g, ' / ')}`);
  await tid('load-error').scrollIntoViewIfNeeded();

  // A context too long for the budget, when a shorter one fits, asks
  // first; the scripted answer is Cancel, so the load is refused too.
  const r = await bind('LoadModel', { path: fx.long, ctx: fx.longCtx, kv: 'q4' });
  check(!r.ok && /will not fit/i.test(r.error), `loading ${fx.longCtx} tokens: ${JSON.stringify(r)}`);
  const asked2 = (await dialogLines()).slice(dialogsBefore);
  check(asked2.some((l) => /Load with \d+\s?K context/i.test(l)), `no "Load with N K context?" question was asked: ${asked2.join(' | ') || 'none'}`);
  console.log(`  asked: ${asked2.join(' | ')}`);
  const s2 = await bindOK('Status');
  check(s2.state === 'ready' && s2.model.path === fx.long, `after the cancelled question the model changed: ${JSON.stringify(s2.model)}`);
});

await step('bad-model-files', async () => {
  await tab('models');
  // In the models folder: listed with the reason, and not loadable.
  for (const [p, want] of [
    [fx.badFolder, /not a GGUF/i],
    [fx.cutFolder, /cut short|truncated|incomplete/i],
  ]) {
    const row = modelRow(p);
    await row.waitFor();
    const problem = await text(within(row, 'model-problem'));
    soft(want.test(problem), `${path.basename(p)}: the problem shown is "${problem}", want ${want}`);
    const load = within(row, 'load-model');
    soft((await load.count()) === 0 || (await load.isDisabled()), `${path.basename(p)} can be loaded`);
  }
  // Dropped on the window: refused with the reason, and not listed. The
  // drag shows the drop zone; the drop itself arrives as the app's native
  // file drop does, an event with the paths (a browser's drop has none).
  const before = (await bindOK('Models')).length;
  let zoneShot = false;
  for (const [p, want] of [
    [fx.badAdd, /not a GGUF/i],
    [fx.cutAdd, /cut short|truncated|incomplete/i],
  ]) {
    const name = path.basename(p);
    await page.evaluate((name) => {
      const dt = new DataTransfer();
      dt.items.add(new File(['x'], name));
      window.dispatchEvent(new DragEvent('dragenter', { dataTransfer: dt, bubbles: true }));
    }, name);
    soft(await tid('drop-zone').isVisible(), `dragging ${name} over the window shows no drop zone`);
    if (!zoneShot) {
      await extraShot('drop-zone');
      zoneShot = true;
    }
    await page.evaluate((p) => window.runtime.EventsEmit('wails:file-drop', 200, 300, [p]), p);
    const alert = page.getByRole('alert').filter({ hasText: name });
    const shown = await alert.first().waitFor({ timeout: 10_000 }).then(() => text(alert.first()), (e) => `nothing (${e.message.split('\n')[0]})`);
    soft(want.test(shown), `dropping ${name} shows "${shown}", want a message matching ${want}`);
    console.log(`  dropped ${name}: ${shown}`);
  }
  const models = await bindOK('Models');
  soft(models.length === before && !models.some((m) => m.path === fx.badAdd || m.path === fx.cutAdd), 'a refused file is listed');
  soft((await modelRow(fx.badAdd).count()) === 0 && (await modelRow(fx.cutAdd).count()) === 0, 'a refused file shows in the list');
  // The open dialog, cancelled: nothing is added and nothing breaks.
  const dialogsBefore = (await dialogLines()).length;
  await tid('open-model-file').click();
  const opened = await poll(async () => (await dialogLines()).slice(dialogsBefore)[0], 'the open dialog to be shown', 10_000);
  console.log(`  ${opened}`);
  soft((await bindOK('Models')).length === before, 'cancelling the open dialog added a model');
  await tid('local-models').scrollIntoViewIfNeeded();
});

await step('expected-speed', async () => {
  await tab('models');
  // Every loadable model shows the decode speed to expect here, as
  // Models() computes it from the header (the CPU's measured rate on
  // this machine), and says how on hover.
  const models = await bindOK('Models');
  const good = models.filter((m) => !m.problem);
  check(good.length > 0, 'no loadable model is listed');
  for (const m of good) {
    const row = modelRow(m.path);
    await row.waitFor();
    const shown = await text(within(row, 'model-speed'));
    const n = Number(/^~([\d.]+) tok\/s$/.exec(shown)?.[1]);
    check(m.tokPerSec > 0 && Math.abs(n - m.tokPerSec) <= Math.max(0.06, m.tokPerSec * 0.03), `${path.basename(m.path)} shows "${shown}", Models() says ${m.tokPerSec}`);
    check(/measured/.test(await within(row, 'model-speed').getAttribute('title')), `${path.basename(m.path)}: the speed's note does not say it was measured`);
  }
  console.log(`  ${good.map((m) => `${path.basename(m.path)} ~${m.tokPerSec.toFixed(1)} tok/s`).join(', ')}`);
  // A catalog file shows it beside its memory verdict, before any download.
  const entry = catalogEntry(fx.tiny.id);
  await entry.scrollIntoViewIfNeeded();
  const file = entry.locator(`[data-testid="catalog-file"][data-quant="${fx.tiny.quant}"]`);
  const speed = await text(within(file, 'catalog-speed'));
  check(/^~[\d.]+ tok\/s$/.test(speed), `the catalog file shows "${speed}" for its speed`);
  console.log(`  catalog ${fx.tiny.id} ${fx.tiny.quant}: ${await text(within(file, 'catalog-estimate'))} · ${speed}`);
});

await step('download-interrupt-resume', async () => {
  await tab('models');
  const entry = catalogEntry(fx.tiny.id);
  await entry.scrollIntoViewIfNeeded();
  const file = entry.locator(`[data-testid="catalog-file"][data-quant="${fx.tiny.quant}"]`);
  await file.waitFor();
  // The listed estimate is against the budget in force (the limit set in
  // Settings), as Catalog() computes it now.
  const listed = (await bindOK('Catalog')).find((e) => e.id === fx.tiny.id).files[0].estimate;
  const shown = await text(within(file, 'catalog-estimate'));
  const m = /up to ([\d.,\u00a0\u202f]*\d)\s*([KM]?)/.exec(shown);
  const shownMax = m ? Number(m[1].replace(/[,\u00a0\u202f]/g, '')) * { '': 1, K: 1024, M: 1048576 }[m[2]] : NaN;
  soft(Math.abs(shownMax - listed.maxCtx) <= listed.maxCtx * 0.01 + 1, `the catalog shows "${shown}", but against the ${(listed.budget / 1048576).toFixed(0)} MiB budget in force the largest context is ${listed.maxCtx}`);
  // The exact estimate reads the header by range requests.
  await within(file, 'catalog-exact').click();
  await poll(async () => (await fileRequests()).some((r) => r.path === fx.tiny.urlPath && r.status === 206 && r.start === 0), 'a range request for the header');

  await within(file, 'download-button').click();
  const progress = within(file, 'download-progress');
  await progress.waitFor({ timeout: 15_000 });
  await poll(async () => (await progressValue(progress)) > 0.05, 'download progress');
  check(await visible(within(file, 'download-speed')), 'no download speed is shown');
  check(await visible(within(file, 'download-eta')), 'no time left is shown');
  await extraShot('progress');
  // The server cuts the first transfer at 35%; the app reconnects and asks
  // for the rest.
  await poll(async () => (await fileRequests()).some((r) => r.path === fx.tiny.urlPath && r.dropped), 'the server to cut the transfer', 30_000);
  await poll(async () => (await fileRequests()).some((r) => r.path === fx.tiny.urlPath && r.status === 206 && r.start > 0), 'the app to reconnect with a Range request', 30_000);
  // Cancel past half-way, then resume by hand.
  await poll(async () => (await progressValue(progress)) > 0.5, 'the download past half-way', 30_000);
  await within(file, 'download-cancel').click();
  await poll(async () => !(await visible(within(file, 'download-cancel'))), 'the download to stop');
  const cancelledAt = Math.max(...(await fileRequests()).filter((r) => r.path === fx.tiny.urlPath).map((r) => r.start + r.sent));
  await extraShot('cancelled');
  check(!fs.existsSync(path.join(fx.modelsDir, fx.tiny.fileName)), 'a cancelled download is in the models folder under its final name');
  await within(file, 'download-button').click();
  await within(file, 'download-done').waitFor({ timeout: 60_000 });
  const reqs = (await fileRequests()).filter((r) => r.path === fx.tiny.urlPath && r.method === 'GET' && r.status !== 416);
  const resume = reqs.filter((r) => r.status === 206 && r.start >= Math.min(cancelledAt, fx.tiny.size) * 0.5 && r.start > 0);
  check(resume.length >= 2, `the download did not resume where it stopped (stopped near byte ${cancelledAt}); requests: ${JSON.stringify(reqs)}`);
  const local = path.join(fx.modelsDir, fx.tiny.fileName);
  await modelRow(local).waitFor({ timeout: 15_000 });
  check(!(await visible(within(modelRow(local), 'model-problem'))), 'the downloaded model shows a problem');
  await within(file, 'download-done').scrollIntoViewIfNeeded();
});

await step('download-corrupt-rejected', async () => {
  await tab('models');
  const entry = catalogEntry(fx.corrupt.id);
  await entry.scrollIntoViewIfNeeded();
  const file = entry.locator(`[data-testid="catalog-file"][data-quant="${fx.corrupt.quant}"]`);
  await within(file, 'download-button').click();
  await within(file, 'download-error').waitFor({ timeout: 60_000 });
  const msg = await text(within(file, 'download-error'));
  check(/sha256|corrupt|damaged|does not match/i.test(msg), `the corrupt download's error is "${msg}"`);
  console.log(`  ${msg}`);
  check(!(await visible(within(file, 'download-done'))), 'the corrupt download shows as done');
  const local = path.join(fx.modelsDir, fx.corrupt.fileName);
  await sleep(2500); // the folder watcher's poll
  check((await modelRow(local).count()) === 0, 'the corrupt download is listed');
  check(!(await bindOK('Models')).some((m) => m.path === local), 'the corrupt download is in Models()');
  // Nothing of it is kept, so nothing may be offered as a resume.
  const listed = (await bindOK('Catalog')).find((e) => e.id === fx.corrupt.id).files[0];
  check(!listed.partial, `Catalog() says ${listed.partial} bytes of the removed file are kept`);
  const offer = await text(within(file, 'download-button'));
  check(!/kept|resume/i.test(offer), `the rejected download's button offers "${offer}" though the file was removed`);
});

await step('load-demo-model', async () => {
  await tab('models');
  const row = modelRow(state.demoPath);
  await row.waitFor();
  await within(row, 'load-model').click();
  await poll(async () => (await row.getAttribute('data-loaded')) === 'true', 'the demo model to show as loaded', 60_000);
  const s = await ready('the demo model');
  check(s.model.demo, `the loaded model is not the demo: ${JSON.stringify(s.model)}`);
  await tid('demo-badge').waitFor();
  await tid('demo-note').waitFor();
  await tab('chat');
});

await step('reload-finds-history', async () => {
  await page.reload();
  await page.waitForFunction(() => window.go && window.go.desktop && window.go.desktop.App && window.runtime);
  await tab('history');
  await tid('history-list').waitFor();
  const items = tid('history-item');
  await poll(async () => (await items.count()) >= 2, 'the two conversations in the history');
  await tid('history-search').fill('kettle');
  await poll(async () => (await items.count()) === 1, 'one search result for "kettle"');
  const item = items.first();
  check((await text(item)).toLowerCase().includes('kettle'), `the search result is "${await text(item)}"`);
  state.firstConversation = Number(await item.getAttribute('data-id'));
  await within(item, 'history-open').click();
  await poll(async () => (await count(tid('message'))) >= 2, 'the conversation to be restored');
  const user = page.locator('[data-testid="message"][data-role="user"]').first();
  check((await text(user)).includes(state.firstPrompt), 'the restored conversation does not start with the prompt');
  const reply = page.locator('[data-testid="message"][data-role="assistant"]').first();
  check((await text(within(reply, 'markdown'))).length > 0, 'the restored reply is empty');
  // Export writes Markdown where the (scripted) save dialog says.
  await tab('history');
  await tid('history-search').fill('');
  const again = page.locator(`[data-testid="history-item"][data-id="${state.firstConversation}"]`);
  await within(again, 'history-export').click();
  const saved = await poll(() => fs.readdirSync(fx.saveDir).find((f) => f.endsWith('.md')), 'the exported Markdown file', 10_000);
  const md = fs.readFileSync(path.join(fx.saveDir, saved), 'utf8');
  check(md.includes(state.firstPrompt), `the exported ${saved} lacks the prompt`);
  await tab('chat');
});

// --- quick actions and the local server ---
/** setClipboard puts text in the page's clipboard, and in the app's where its runtime has one. */
async function setClipboard(text) {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(appURL).origin });
  await page.evaluate(async (t) => {
    await navigator.clipboard.writeText(t);
    if (typeof window.runtime?.ClipboardSetText === 'function') await window.runtime.ClipboardSetText(t).catch(() => {});
  }, text);
}

await step('quick-action-on-clipboard', async () => {
  await tab('chat');
  await ready();
  const clip = 'The kettle sang on the stove while the rain tapped the window.';
  await setClipboard(clip);
  const summarize = page.locator('[data-testid="quick-action"][data-name="Summarize"]');
  await summarize.waitFor();
  check(!(await summarize.isDisabled()), 'the Summarize action is disabled with a model ready');
  // The action starts a new chat: its reply is the first assistant message.
  await watchReply(0);
  await summarize.click();
  const user = page.locator('[data-testid="message"][data-role="user"]');
  await poll(async () => (await count(user)) === 1 && (await text(user.first())).includes(clip), "the action's prompt with the clipboard's text as the user message");
  check((await text(user.first())).startsWith('Summarize the following text'), `the user message is "${(await text(user.first())).slice(0, 80)}"`);
  const msg = page.locator('[data-testid="message"][data-role="assistant"]').first();
  await waitState(msg, 'done');
  const reply = await text(within(msg, 'markdown'));
  check(reply.length > 0, 'the answer is empty');
  const streamed = (await replySeen()).filter((s) => s.state === 'streaming' && s.len > 0).map((s) => s.len);
  check(new Set(streamed).size >= 2, `the answer did not stream: ${JSON.stringify((await replySeen()).slice(0, 12))}`);
  const convs = await bindOK('Conversations', '');
  check(convs.some((c) => c.title === 'Summarize'), `no conversation titled Summarize: ${convs.map((c) => c.title).join(' | ')}`);
  // Text that is not there is refused with a clear message.
  const empty = await bind('RunQuickAction', 'Summarize', '  ');
  check(!empty.ok && /clipboard has no text/.test(empty.error), `an empty clipboard: ${JSON.stringify(empty)}`);
  console.log(`  ${reply.length} characters streamed in ${new Set(streamed).size} steps`);
});

await step('local-server-toggle', async () => {
  await tab('settings');
  await tid('server-settings').waitFor();
  // A free port: another app (or another run) may hold 11435.
  const port = await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
    srv.on('error', reject);
  });
  await tid('server-address').fill(`127.0.0.1:${port}`);
  await tid('server-save').click();
  await tid('server-enabled').check();
  const status = tid('server-status');
  await poll(async () => (await text(status)).startsWith('Serving on'), 'the server to say where it serves');
  const url = `http://127.0.0.1:${port}/v1`;
  check((await text(status)) === `Serving on ${url}`, `the status says "${await text(status)}"`);
  await extraShot('on');
  const models = await (await fetch(`${url}/models`)).json();
  check(models.data?.length === 1, `GET /v1/models: ${JSON.stringify(models)}`);
  const res = await fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8 }),
  });
  const body = await res.json();
  check(res.status === 200 && body.choices?.[0]?.message, `POST /v1/chat/completions: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
  await tid('server-enabled').uncheck();
  await poll(async () => (await text(status)) === 'Off', 'the server to say it is off');
  const closed = await fetch(`${url}/models`).then(
    () => false,
    () => true,
  );
  check(closed, `${url} still answers after the switch was turned off`);
  await tab('chat');
});

// --- reasoning models ---
/** freePort is a loopback port nothing listens on. */
const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = srv.address().port;
      srv.close(() => resolve(p));
    });
    srv.on('error', reject);
  });

await step('reasoning-thinking-section', async () => {
  // A model with Qwen3's chat template whose reply is scripted: a think block, then the answer.
  const before = (await bindOK('Status')).model?.path;
  await tab('models');
  const row = modelRow(fx.thinker);
  await row.scrollIntoViewIfNeeded();
  await within(row, 'load-model').click();
  const st = await poll(async () => {
    const s = await bindOK('Status');
    return s.model?.path === fx.thinker && s.state === 'ready' ? s : null;
  }, 'the reasoning model', 60_000);
  check(st.model.reasoning === 'think' && st.model.thinkingControl === 'enable_thinking', `the model's reasoning: ${st.model.reasoning} / ${st.model.thinkingControl}`);
  await tab('chat');
  await tid('new-chat').click();
  check(await tid('thinking-switch').isChecked(), 'the thinking switch is off in a new chat');
  // Record the section's states as the reply streams: open while it thinks.
  await page.evaluate(() => {
    const seen = (window.__e2eThinking = []);
    const look = () => {
      const d = document.querySelector('[data-testid="message"][data-role="assistant"] [data-testid="thinking"]');
      const entry = d && `${d.open ? 'open' : 'closed'}:${d.querySelector('summary')?.textContent}`;
      if (entry && seen[seen.length - 1] !== entry) seen.push(entry);
    };
    new MutationObserver(look).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
  });
  const msg = await sendPrompt('Hello there');
  await waitState(msg, 'done');
  const section = within(msg, 'thinking');
  check(await visible(section), 'no Thinking section above the answer');
  check(!(await section.evaluate((d) => d.open)), 'the Thinking section is still open after the answer came');
  const summary = await text(within(msg, 'thinking-toggle'));
  check(/^Thought for [\d.]+ s$/.test(summary), `the collapsed section says "${summary}"`);
  check(!(await visible(within(msg, 'thinking-text'))), 'the thinking shows while the section is collapsed');
  const answer = await text(within(msg, 'markdown'));
  check(answer === fx.thinkerAnswer, `the answer shows "${answer}", want "${fx.thinkerAnswer}"`);
  const states = await page.evaluate(() => window.__e2eThinking);
  soft(states.some((s) => s.startsWith('open:Thinking')), `the section was never open while thinking: ${JSON.stringify(states)}`);
  console.log(`  the section went ${states.join(' → ')}`);
  await extraShot('collapsed');
  await within(msg, 'thinking-toggle').click();
  await poll(async () => section.evaluate((d) => d.open), 'the Thinking section to open on a click');
  const thoughts = await text(within(msg, 'thinking-text'));
  check(thoughts === fx.thinkerReasoning, `the expanded section shows "${thoughts}"`);
  await extraShot('expanded');

  // Thinking off for this chat: Qwen3's template closes an empty think block in the prompt.
  await tid('thinking-switch').uncheck();
  const off = await sendPrompt('And now without thinking');
  await waitState(off, 'done');
  const prompt = await bindOK('LastPrompt');
  check(/<\|im_start\|>assistant\n<think>\s*<\/think>\s*$/.test(prompt.text), `with thinking off the prompt ends ${JSON.stringify(prompt.text.slice(-40))}`);

  // The local server: reasoning_content beside content, whole and streamed.
  await tab('settings');
  await tid('server-settings').waitFor();
  const port = await freePort();
  await tid('server-address').fill(`127.0.0.1:${port}`);
  await tid('server-save').click();
  await tid('server-enabled').check();
  await poll(async () => (await text(tid('server-status'))).startsWith('Serving on'), 'the server to say where it serves');
  const url = `http://127.0.0.1:${port}/v1/chat/completions`;
  const ask = (extra) =>
    fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 64, ...extra }) });
  const whole = await (await ask({})).json();
  const m = whole.choices?.[0]?.message;
  check(m?.content === fx.thinkerAnswer && m?.reasoning_content === fx.thinkerReasoning, `not streamed: ${JSON.stringify(whole).slice(0, 300)}`);
  const raw = await (await ask({ stream: true })).text();
  let content = '';
  let reasoning = '';
  let reasoningChunks = 0;
  for (const line of raw.split('\n')) {
    if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
    const d = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
    content += d.content ?? '';
    if (d.reasoning_content) {
      reasoning += d.reasoning_content;
      reasoningChunks++;
    }
  }
  check(content === fx.thinkerAnswer && reasoning === fx.thinkerReasoning, `streamed: content "${content}", reasoning_content "${reasoning}"`);
  check(reasoningChunks > 1, `reasoning_content came in ${reasoningChunks} chunk(s), not streamed`);
  console.log(`  server: reasoning_content ${JSON.stringify(m.reasoning_content)}; streamed in ${reasoningChunks} chunks`);
  await tid('server-enabled').uncheck();
  await poll(async () => (await text(tid('server-status'))) === 'Off', 'the server to say it is off');

  // Back to the model the later steps expect.
  if (before) {
    await tab('models');
    await within(modelRow(before), 'load-model').click();
    await poll(async () => {
      const s = await bindOK('Status');
      return s.model?.path === before && s.state === 'ready';
    }, 'the model loaded before', 60_000);
  }
  await tab('chat');
}, 90_000);

// --- documents ---
/** dropFile drops a file on the popover the way a browser does: a DataTransfer holding a File. */
async function dropFile(name, content, type = 'text/plain') {
  await page.evaluate(
    ({ name, content, type }) => {
      const bytes = typeof content === 'string' ? content : Uint8Array.from(content);
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], name, { type }));
      const popover = document.querySelector('main');
      for (const kind of ['dragenter', 'dragover', 'drop']) {
        popover.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    },
    { name, content, type },
  );
}
const docChip = (name) => page.locator('[data-testid="document-chip"]').filter({ has: page.locator('[data-testid="document-name"]', { hasText: name }) });
/** fillerLines are varied sentences without the words of the question. */
const fillerLines = (n) =>
  Array.from({ length: n }, (_, i) => `${['The river', 'A quiet street', 'The old mill', 'Our garden', 'The harbour'][i % 5]} ${['wound past', 'looked over', 'stood beside', 'ran along'][(i >> 2) % 4]} the ${['meadow', 'chapel', 'northern hills', 'market square'][(i >> 4) % 4]} in ${1700 + i}.`);
const fact = 'The access code for Camila Mack is 6265-96.';
const question = 'What is the access code for Camila Mack?';

await step('document-drop-ask-cite', async () => {
  await tab('chat');
  await tid('new-chat').click();
  await page.evaluate(() => {
    window.__e2eFinals = [];
    window.runtime.EventsOn('chat:final', (f) => window.__e2eFinals.push(f));
  });
  const small = fillerLines(30);
  small[16] = fact;
  await dropFile('harbour-notes.txt', small.join('\n') + '\n');
  const chip = docChip('harbour-notes.txt');
  await poll(async () => (await chip.getAttribute('data-state')) === 'ready' && /fits whole/.test(await text(within(chip, 'document-status'))), 'the dropped document to be read and fit', 30_000);
  const facts = await text(within(chip, 'document-facts'));
  check(/^Text · 30 lines · [\d,]+ tokens$/.test(facts), `the chip says "${facts}"`);
  const status = await text(within(chip, 'document-status'));
  const headerKV = (await text(tid('model-meta'))).split(' · ')[0];
  check(/^fits whole in [\d.]+K context with /.test(status) && status.endsWith(` with ${headerKV}`), `the tray's status line is "${status}", the header names the cache "${headerKV}"`);
  await extraShot('attached');

  // A question: the answer streams, with the whole document as its source.
  const n = await count(page.locator('[data-testid="message"][data-role="assistant"]'));
  await watchReply(n);
  const msg = await sendPrompt(question);
  await waitState(msg, 'done');
  const streamed = (await replySeen()).filter((s) => s.state === 'streaming' && s.len > 0).map((s) => s.len);
  check(new Set(streamed).size >= 2, 'the answer did not stream');
  const src = await text(within(msg, 'source-chip'));
  check(src === '[1] harbour-notes.txt, whole document, lines 1–30', `the citation chip is "${src}"`);
  check((await text(within(msg, 'document-use'))) === 'harbour-notes.txt: went in whole', 'the answer does not say the document went in whole');

  // A follow-up computes only its own tokens: the document is reused from the cache.
  const msg2 = await sendPrompt('And who else has a code?');
  await waitState(msg2, 'done');
  const finals = await poll(async () => {
    const f = await page.evaluate(() => window.__e2eFinals);
    return f.length >= 2 ? f : null;
  }, 'both final events');
  const [f1, f2] = finals.slice(-2);
  check(f2.reusedTokens >= f1.promptTokens && f2.prefillTokens === f2.promptTokens - f2.reusedTokens,
    `the follow-up reused ${f2.reusedTokens} of ${f2.promptTokens} prompt tokens (the first prompt had ${f1.promptTokens}), prefilled ${f2.prefillTokens}`);
  console.log(`  follow-up: ${f2.reusedTokens} of ${f2.promptTokens} prompt tokens from the cache, ${f2.prefillTokens} computed`);

  // A document too large for the context: the answer comes from the parts that hold the fact.
  await within(chip, 'document-remove').click();
  const big = fillerLines(900);
  const factLine = 641;
  big[factLine - 1] = fact;
  big[200] = 'The access code for Camilo Mackey is 6281-14.';
  await dropFile('ledger.md', big.join('\n') + '\n', 'text/markdown');
  const bigChip = docChip('ledger.md');
  await poll(async () => (await bigChip.getAttribute('data-state')) === 'ready' && /too large/.test(await text(within(bigChip, 'document-status'))), 'the large document to be read', 30_000);
  check((await text(within(bigChip, 'document-status'))) === 'too large: answering from the most relevant parts', `the large document's status is "${await text(within(bigChip, 'document-status'))}"`);
  // And a file that is no document: a red chip, and the other stays.
  await dropFile('photo.png', [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52], 'image/png');
  const png = docChip('photo.png');
  await poll(async () => (await png.getAttribute('data-state')) === 'error', 'the red chip of the PNG');
  const why = await text(within(png, 'document-status'));
  check(/not a text document/.test(why), `the PNG's chip says "${why}"`);
  const msg3 = await sendPrompt(question);
  await waitState(msg3, 'done');
  const chips = await within(msg3, 'source-chip').allInnerTexts();
  check(chips.length > 0, 'the answer from parts has no sources');
  const holds = chips.some((c) => {
    const m = /^\[\d+\] ledger\.md, lines? (\d+)(?:–(\d+))?$/.exec(c.trim());
    return m && Number(m[1]) <= factLine && factLine <= Number(m[2] ?? m[1]);
  });
  check(holds, `no source holds line ${factLine} with the fact: ${chips.join(' | ')}`);
  const use = await text(within(msg3, 'document-use'));
  check(/^ledger\.md: too large: answering from the most relevant parts \(\d+ of \d+ sections\)$/.test(use), `the answer says "${use}"`);
  console.log(`  from parts: ${chips.join(' | ')}`);
  await extraShot('from-parts');
  await tid('new-chat').click();
  await poll(async () => (await count(tid('document-chip'))) === 0, 'New chat to clear the documents');
}, 150_000); // three answers of the demo model and a 2K-token prefill, on a CPU shared with the app's build

// --- the document Q&A demo that make run opens ---
await step('docqa-demo-cited-answer', async () => {
  await tab('chat');
  await bindOK('LoadModel', { path: fx.docqa, ctx: 2048, kv: 'q8' });
  const s = await ready('the document Q&A demo');
  check(s.model.path === fx.docqa && !s.model.demo, `the loaded model is not the trained demo: ${JSON.stringify(s.model)}`);
  check(!(await visible(tid('demo-note'))), 'the trained demo is called a random-weight model');
  const doc = fs.readFileSync(fx.docqaDocument, 'utf8');
  await dropFile('sample-document.txt', doc);
  const chip = docChip('sample-document.txt');
  await poll(async () => (await chip.getAttribute('data-state')) === 'ready' && /fits whole/.test(await text(within(chip, 'document-status'))), 'the sample document to be read and fit', 30_000);
  const msg = await sendPrompt(question);
  await waitState(msg, 'done');
  const answer = await text(within(msg, 'markdown'));
  check(answer === '6265-96', `the demo answered "${answer}", not 6265-96`);
  const lines = doc.trimEnd().split('\n').length;
  const src = await text(within(msg, 'source-chip'));
  check(src === `[1] sample-document.txt, whole document, lines 1–${lines}`, `the citation chip is "${src}"`);
  await extraShot('answer');
  // Back to the random demo the later steps expect.
  await tid('new-chat').click();
  await poll(async () => (await count(tid('document-chip'))) === 0, 'New chat to clear the documents');
  await bindOK('LoadModel', { path: state.demoPath });
  await ready('the random demo model again');
}, 90_000);

// A document conversation reopened from History keeps its documents: the
// chips come back and a follow-up is answered from the document, citing it.
await step('document-reopen-from-history', async () => {
  await tab('chat');
  await tid('new-chat').click();
  await page.evaluate(() => {
    window.__e2eReopenFinals = [];
    window.runtime.EventsOn('chat:final', (f) => window.__e2eReopenFinals.push(f));
  });
  const lines = fillerLines(20);
  lines[11] = 'The ferry to Lindholm leaves at 7:45 from pier 3.';
  await dropFile('ferry-notes.txt', lines.join('\n') + '\n');
  const chip = docChip('ferry-notes.txt');
  const fits = async () => (await chip.getAttribute('data-state')) === 'ready' && /fits whole/.test(await text(within(chip, 'document-status')));
  await poll(fits, 'the dropped document to be read and fit', 30_000);
  const msg = await sendPrompt('When does the ferry to Lindholm leave?');
  await waitState(msg, 'done');
  const cited = '[1] ferry-notes.txt, whole document, lines 1–20';
  check((await text(within(msg, 'source-chip'))) === cited, `the first answer cites "${await text(within(msg, 'source-chip'))}"`);

  // A new chat drops the chips; History brings the conversation back with them.
  await tid('new-chat').click();
  await poll(async () => (await count(tid('document-chip'))) === 0, 'New chat to clear the documents');
  await tab('history');
  await tid('history-search').fill('Lindholm');
  const items = tid('history-item');
  await poll(async () => (await items.count()) === 1, 'one conversation about Lindholm in the history');
  await within(items.first(), 'history-open').click();
  await poll(async () => (await count(page.locator('[data-testid="message"][data-role="assistant"]'))) === 1, 'the conversation to be restored');
  await poll(fits, 'the reopened conversation to have its document back, read and fitting whole', 30_000);
  check((await count(tid('document-chip'))) === 1, `${await count(tid('document-chip'))} chips after reopening, want 1`);
  check(!(await visible(within(chip, 'document-note'))), `the chip has a note: ${await visible(within(chip, 'document-note')) ? await text(within(chip, 'document-note')) : ''}`);
  await extraShot('reopened');

  // The follow-up goes with the document, whole: the same prompt prefix, reused from the cache.
  const msg2 = await sendPrompt('And from which pier does it leave?');
  await waitState(msg2, 'done');
  check((await text(within(msg2, 'source-chip'))) === cited, `the follow-up cites "${await text(within(msg2, 'source-chip'))}"`);
  check((await text(within(msg2, 'document-use'))) === 'ferry-notes.txt: went in whole', 'the follow-up does not say the document went in whole');
  const [f1, f2] = await poll(async () => {
    const f = await page.evaluate(() => window.__e2eReopenFinals);
    return f.length >= 2 ? f.slice(-2) : null;
  }, 'both final events');
  check(f2.promptTokens > f1.promptTokens && f2.reusedTokens >= f1.promptTokens,
    `the follow-up's prompt has ${f2.promptTokens} tokens, ${f2.reusedTokens} from the cache; the first had ${f1.promptTokens}`);
  console.log(`  reopened follow-up: ${f2.reusedTokens} of ${f2.promptTokens} prompt tokens from the cache`);
}, 90_000);

/** dropFiles drops several files at once; each is {name, text} or {name, zeros: n} (n bytes made in the page). */
async function dropFiles(files) {
  await page.evaluate((files) => {
    const dt = new DataTransfer();
    for (const f of files) dt.items.add(new File([f.zeros !== undefined ? new Uint8Array(f.zeros) : f.text], f.name, { type: 'text/plain' }));
    const popover = document.querySelector('main');
    for (const kind of ['dragenter', 'dragover', 'drop']) popover.dispatchEvent(new DragEvent(kind, { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, files);
}

// Empty files are refused as empty; a file over the Settings limit is
// refused at once, naming it; many chips stay in sight, or are counted.
await step('document-empty-oversized-many', async () => {
  await tab('settings');
  const limitMiB = Number(await tid('setting-document-limit').inputValue());
  check(limitMiB > 0, `Settings shows the document limit as "${limitMiB}"`);
  await tab('chat');
  await tid('new-chat').click();
  const t0 = Date.now();
  await dropFiles([
    { name: 'empty.txt', text: '' },
    { name: 'blank.txt', text: '  \n\t\n\n' },
    { name: 'huge.txt', zeros: (limitMiB + 1) * 2 ** 20 },
  ]);
  const huge = docChip('huge.txt');
  await poll(async () => (await huge.getAttribute('data-state')) === 'error', 'the oversized file to be refused', 5_000, 50);
  const refusedIn = Date.now() - t0;
  check(refusedIn < 2_500, `the oversized file was refused after ${refusedIn} ms`);
  const why = await text(within(huge, 'document-status'));
  check(why === `huge.txt: the file is ${limitMiB + 1} MiB, over the ${limitMiB} MiB limit for documents (Settings › Largest document)`, `the oversized file's chip says "${why}"`);
  for (const name of ['empty.txt', 'blank.txt']) {
    const c = docChip(name);
    await poll(async () => (await c.getAttribute('data-state')) === 'error', `${name} to be refused`);
    const says = await text(within(c, 'document-status'));
    check(/the document is empty/.test(says) && says.includes(name), `${name}'s chip says "${says}"`);
  }
  await extraShot('refused');

  await tid('new-chat').click();
  const names = ['one.txt', 'two.txt', 'three.txt', 'four.txt', 'five.txt'];
  await dropFiles(names.map((name, i) => ({ name, text: fillerLines(4 + i).join('\n') + '\n' })));
  await poll(async () => (await tid('document-tray').getAttribute('data-count')) === '5', 'the five chips');
  const more = tid('document-more');
  await more.waitFor();
  check(/^\+2 more/.test(await text(more)), `the count says "${await text(more)}"`);
  const shownChips = tid('document-chip');
  check((await count(shownChips)) === 3, `${await count(shownChips)} chips shown beside the count, want 3`);
  for (let i = 0; i < 3; i++) check(await shownChips.nth(i).isVisible(), `chip ${i + 1} is not visible`);
  check(await more.isVisible(), 'the count is not visible');
  await extraShot('collapsed');
  await more.click();
  await poll(async () => (await count(shownChips)) === 5, 'all five chips after clicking the count');
  await poll(async () => (await count(page.locator('[data-testid="document-chip"][data-state="ready"]'))) === 5, 'the five documents to be read', 30_000);
  await shownChips.nth(4).scrollIntoViewIfNeeded();
  check(await shownChips.nth(4).isVisible(), 'the fifth chip is not visible when expanded');
  await extraShot('expanded');
  await tid('new-chat').click();
});

// --- remote models ---
await step('remote-model-chat', async () => {
  const r = cfg.remote;
  const stats = async () => (await fetch(`${r.url}/nibble/stats`)).json();
  await tab('models');
  await tid('remote-add').scrollIntoViewIfNeeded();
  await tid('remote-add').click();
  await tid('remote-name').fill('second');
  // A URL with no API behind it: the message in red, nothing added.
  await tid('remote-url').fill(r.url.replace(/\/v1$/, '/nowhere'));
  await tid('remote-connect').click();
  const wrong = await text(await poll(async () => ((await visible(tid('remote-form-error'))) ? tid('remote-form-error') : null), 'the error of a wrong URL'));
  check(/no OpenAI-compatible API/.test(wrong), `a wrong URL says "${wrong}"`);
  console.log(`  wrong URL: ${wrong}`);
  await tid('remote-url').fill(r.url);
  await tid('remote-connect').click();
  await poll(async () => (await tid('remote-model').inputValue()) === r.model, "the second server's model in the list");
  check((await tid('remote-context').inputValue()) === String(r.ctx), `the context field shows ${await tid('remote-context').inputValue()}, want the server's ${r.ctx}`);
  await extraShot('form');
  await tid('remote-save').click();
  const row = page.locator('[data-testid="remote-endpoint"][data-name="second"]');
  await row.waitFor();
  await within(row, 'remote-use').click();
  await poll(async () => (await row.getAttribute('data-active')) === 'true', 'the endpoint to be in use');
  const meta = await text(tid('remote-meta'));
  check(meta.startsWith(`second · remote · ${r.host}`), `the header says "${meta}"`);
  const st = await bindOK('Status');
  check(st.remote && st.remote.host === r.host && st.model, `Status: remote ${JSON.stringify(st.remote)}, local ${JSON.stringify(st.model?.name)}`);

  const before = await stats();
  await tab('chat');
  await tid('new-chat').click();
  check((await text(tid('remote-note'))).includes(r.host), 'the empty chat does not say where replies come from');
  await page.evaluate(() => {
    window.__e2eRemoteFinals = [];
    window.runtime.EventsOn('chat:final', (f) => window.__e2eRemoteFinals.push(f));
  });
  const msg = await sendPrompt('Hello from the first Nibble');
  await waitState(msg, 'done');
  const shown = await text(within(msg, 'markdown'));
  const f = await poll(async () => (await page.evaluate(() => window.__e2eRemoteFinals))[0], 'the final event');
  check(f.finishReason === 'stop' || f.finishReason === 'length', `the reply ended "${f.finishReason}": ${f.error ?? ''}`);
  check(shown.length > 0 && f.text.length > 0, `the window shows "${shown.slice(0, 60)}", the reply was "${f.text.slice(0, 60)}"`);
  const after = await stats();
  check(after.requests === before.requests + 1 && after.completed === before.completed + 1, `the second server's counters went from ${JSON.stringify(before)} to ${JSON.stringify(after)}`);
  check(after.completion_tokens - before.completion_tokens === f.genTokens && f.genTokens > 0, `the reply counts ${f.genTokens} tokens, the second server generated ${after.completion_tokens - before.completion_tokens}`);
  const d = await bindOK('Diagnostics');
  check(d.chatTarget.includes(`${r.url}/chat/completions`), `Diagnostics says chats go to "${d.chatTarget}"`);
  console.log(`  ${f.genTokens} tokens from ${r.host} in ${f.ttftMs.toFixed(0)} ms to the first; its server counted ${after.requests} request(s)`);
  await extraShot('reply');

  // Back to the local model, which stayed loaded.
  await tab('models');
  await within(row, 'remote-use-local').click();
  await poll(async () => (await row.getAttribute('data-active')) === 'false', 'the local model to be in use again');
  const back = await bindOK('Status');
  check(!back.remote && back.model, `after Use local: ${JSON.stringify(back)}`);
  await tab('chat');
});

await step('quit-mid-reply-keeps-history', async () => {
  // A model whose replies run long, so the quit lands mid-reply.
  await tab('models');
  const row = modelRow(fx.long);
  await within(row, 'load-model').click();
  await poll(async () => (await bindOK('Status')).model?.path === fx.long && (await bindOK('Status')).state === 'ready', 'the chat model', 60_000);
  await tab('chat');
  await tid('new-chat').click();
  const before = await bindOK('Conversations', '');
  const n = await count(page.locator('[data-testid="message"][data-role="assistant"]'));
  await watchReply(n);
  const msg = await sendPrompt('Describe every lighthouse on the coast');
  await poll(async () => (await msg.getAttribute('data-state')) === 'streaming' && (await text(within(msg, 'markdown'))).length > 0, 'streamed text', 30_000, 20);
  await extraShot('before-quit');
  // As if the window were closed and the app quit: SIGTERM (Wails quits
  // through its shutdown path), then the app again on the same data.
  const r = await fetch(`${cfg.ctl}/ctl/restart`, { method: 'POST' });
  const body = await r.text();
  check(r.ok, `restarting the app: ${body}`);
  const restarted = JSON.parse(body);
  check(restarted.graceful, `the app did not quit on SIGTERM (exit: ${restarted.exit})`);
  appURL = restarted.url;
  await openApp(appURL);
  await ready('the model after the restart');
  const after = await bindOK('Conversations', '');
  check(after.length === before.length + 1, `the history holds ${after.length} conversations after the restart, want ${before.length + 1}`);
  const newest = after.find((c) => !before.some((b) => b.id === c.id));
  check(newest, 'the interrupted conversation is not in the history');
  const conv = await bindOK('Conversation', newest.id);
  check(conv.messages.length === 2 && conv.messages[1].role === 'assistant', `the interrupted conversation holds ${JSON.stringify(conv.messages.map((m) => m.role))}`);
  const partial = conv.messages[1];
  check(partial.content.length > 0, 'the partial reply was not kept');
  check(partial.stats && partial.stats.finishReason !== 'stop', `the partial reply is stored as finished: ${JSON.stringify(partial.stats)}`);
  console.log(`  kept ${partial.content.length} characters, finish reason "${partial.stats?.finishReason}"`);
  // Everything stored before is still there.
  for (const b of before) {
    check(after.some((c) => c.id === b.id && c.messages === b.messages), `conversation ${b.id} changed across the restart`);
  }
  await tab('history');
  const item = page.locator(`[data-testid="history-item"][data-id="${newest.id}"]`);
  await within(item, 'history-open').click();
  const restored = page.locator('[data-testid="message"][data-role="assistant"]').last();
  await poll(async () => (await text(within(restored, 'markdown'))).length > 0, 'the partial reply in the restored conversation');
});

await step('diagnostics-and-settings', async () => {
  await tab('diagnostics');
  await tid('diagnostics').waitFor();
  const src = await text(tid('diag-budget-source'));
  check(/setting/i.test(src), `the budget source is "${src}", not the limit in Settings`);
  check((await text(tid('diag-backend'))).toLowerCase().includes('cpu'), 'the backend is not named');
  check((await text(tid('diag-dirs'))).includes(fx.home), 'the folders shown are not under NIBBLE_HOME');
  for (const id of ['diag-device', 'diag-budget', 'diag-template', 'diag-versions']) {
    check((await text(tid(id))).length > 0, `${id} is empty`);
  }
  await extraShot('diagnostics');
  await tab('settings');
  await tid('settings-form').waitFor();
  const limit = Number(await tid('setting-memory-limit').inputValue());
  const unit = await tid('setting-memory-unit').inputValue();
  check(unit === 'MiB' && limit === state.budget / 1048576, `the memory limit field shows ${limit} ${unit} for ${state.budget} bytes`);
  // The KV select stays inside its field, its choice readable.
  const kvBox = await tid('setting-kv').boundingBox();
  const fieldBox = await tid('setting-kv').locator('xpath=..').boundingBox();
  check(kvBox && fieldBox && kvBox.x + kvBox.width <= fieldBox.x + fieldBox.width + 0.5, `the KV select (${JSON.stringify(kvBox)}) runs past its field (${JSON.stringify(fieldBox)})`);
  await tid('setting-kv').scrollIntoViewIfNeeded();
  await extraShot('settings');
  // A bad value is refused with a message and nothing is saved.
  const before = await bindOK('Settings');
  await tid('setting-temperature').fill('-3');
  await tid('settings-save').click();
  await tid('settings-error').waitFor();
  const after = await bindOK('Settings');
  check(after.sampling.temperature === before.sampling.temperature, 'a negative temperature was saved');
});

// ---- summary

await browser.close();
const failed = results.filter((r) => !r.ok);
console.log(`\n${results.length - failed.length} of ${results.length} steps passed in ${((Date.now() - started) / 1000).toFixed(0)}s`);
for (const r of results) console.log(`  ${r.ok ? 'PASS' : 'FAIL'} ${r.id}${r.ok ? '' : ': ' + r.error.split('\n')[0]}`);
process.exit(failed.length ? 1 : 0);
