// Drives the daemon's terminal page in headless Chromium (playwright-core from <build>/web):
// type a command, see its output, reload the page, see the screen replayed.
// Usage: WARREN_WEB=<build>/web node terminal_page.cjs URL   (prints "ok" and exits 0)
const { chromium } = require(process.env.WARREN_WEB + '/node_modules/playwright-core');

// Waits until the terminal's rows (xterm's DOM renderer) show `text`.
const showing = (page, text) =>
  page.waitForFunction((t) => {
    const rows = document.querySelector('.xterm-rows');
    return !!rows && rows.innerText.includes(t);
  }, text, {timeout: 20000});

(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(process.argv[2]);
    await showing(page, '#');  // The shell's prompt.
    await page.click('.xterm');
    await page.keyboard.type('echo $((6*7))z');
    await page.keyboard.press('Enter');
    await showing(page, '42z');
    await page.reload();
    await showing(page, '42z');  // Replayed into the new page.
    await page.click('.xterm');   // Keys go to the focused terminal.
    await page.keyboard.type('echo $((7*7))q');
    await page.keyboard.press('Enter');
    await showing(page, '49q');
    console.log('ok');
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(1);
});
