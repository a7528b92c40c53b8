// Drives real VS Code (code-server, already started with the extension installed) in headless Chromium:
// waits for the Lookahead status item to say the model is ready, opens FILE, goes to its end, types TYPE,
// waits for ghost text, takes SCREENSHOT, accepts with Tab, saves with Ctrl+S. Prints one JSON line:
// {"ghost": [...], "status": "..."}. Started by tests/editors/test_vscode.py, which checks the saved file.
// Environment: PLAYWRIGHT_CORE (its directory), CHROMIUM_BIN, URL, FILE (name in the workspace), TYPE,
// SCREENSHOT, TIMEOUT_MS (for the model and for the ghost text).
// GROW=1 (progressive ghost text): after the ghost text shows, waits for it to grow with no key pressed, then
// accepts its next word (Ctrl+Right, VS Code's own) and the rest of its line (Alt+End, the extension's) instead
// of Tab, and saves; prints {"ghost", "grown", "afterWord", "status"}.
const { chromium } = require(process.env.PLAYWRIGHT_CORE);

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const TIMEOUT = Number(process.env.TIMEOUT_MS || 240000);
const GHOST = '.ghost-text-decoration, .ghost-text';

// The text of the Lookahead status bar item (the codicons are not text).
async function statusText(page) {
  return page.$$eval('.statusbar-item', (items) => {
    const ours = items.map((e) => e.textContent.trim()).filter((t) => t.startsWith('Lookahead') || /tok\/s/.test(t));
    return ours[0] || '';
  });
}

async function ghostText(page) {
  return page.$$eval(GHOST, (els) => els.map((e) => e.textContent));
}

async function waitFor(what, fn, timeout) {
  const end = Date.now() + timeout;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

(async () => {
  const browser = await chromium.launch({
    executablePath: env('CHROMIUM_BIN'),
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('console', (m) => { if (/lookahead/i.test(m.text())) console.error('[browser]', m.text()); });
  try {
    await page.goto(env('URL'));
    await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
    let last = '';
    await waitFor('the Lookahead status item to say "Lookahead" and the model size (model ready)', async () => {
      const text = await statusText(page);
      if (text !== last) console.error('[status]', (last = text));
      if (/failed|error/i.test(text)) throw new Error(`status: ${text}`);
      return /^Lookahead( \d+(\.\d+)?B)?$/.test(text);  // "Lookahead 0.5B": the embedded model's size
    }, TIMEOUT);

    await page.keyboard.press('Control+P');
    await page.waitForSelector('.quick-input-widget input', { timeout: 20000 });
    await page.keyboard.type(env('FILE'));
    await page.waitForTimeout(1000);
    await page.keyboard.press('Enter');
    await page.waitForSelector('.monaco-editor .view-lines', { timeout: 20000 });
    await page.click('.monaco-editor .view-lines');
    await page.keyboard.press('Control+End');
    await page.keyboard.type(env('TYPE'), { delay: 50 }); // typing triggers an automatic inline completion
    await page.waitForSelector(GHOST, { timeout: TIMEOUT });
    const ghost = await ghostText(page);
    if (process.env.GROW) {
      const length = (texts) => texts.join('').length;
      const grown = await waitFor('the ghost text to grow with no key pressed', async () => {
        const now = await ghostText(page);
        return length(now) > length(ghost) && now;
      }, 60000);
      await page.screenshot({ path: env('SCREENSHOT') });
      await page.keyboard.press('Control+ArrowRight'); // editor.action.inlineSuggest.acceptNextWord
      // the continuation may still be streaming: any later ghost extends the one read, so the word is gone
      // once the ghost no longer starts with all of it
      const afterWord = await waitFor('the ghost text to lose its first word', async () => {
        const now = await ghostText(page);
        return length(now) > 0 && !now.join('').startsWith(grown.join('')) && now;
      }, 10000);
      await page.keyboard.press('Alt+End'); // editor.action.inlineSuggest.acceptNextLine (the extension's key)
      await waitFor('the ghost text to go after accepting the line', async () => (await page.$$(GHOST)).length === 0,
        10000);
      await page.keyboard.press('Control+S');
      await page.waitForTimeout(1500);
      console.log(JSON.stringify({ ghost, grown, afterWord, status: await statusText(page) }));
      return;
    }
    await page.screenshot({ path: env('SCREENSHOT') });
    await page.keyboard.press('Tab');
    await waitFor('the ghost text to go after Tab', async () => (await page.$$(GHOST)).length === 0, 10000);
    await page.keyboard.press('Control+S');
    await page.waitForTimeout(1500);
    const status = await statusText(page);
    console.log(JSON.stringify({ ghost, status }));
  } catch (error) {
    await page.screenshot({ path: env('SCREENSHOT').replace(/\.png$/, '-failed.png') }).catch(() => {});
    throw error;
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error('FAIL', e); process.exit(1); });
