// Opens a report.html in Debian's headless chromium and checks that it renders
// with no console errors, no page errors, no dialogs and no network requests
// (anything but the file itself). Keeps a full-page screenshot.
// usage: node check_report.js REPORT.html SCREENSHOT.png [MIN_SVG]
'use strict';
const path = require('path');
const { chromium } = require('playwright-core');

async function main() {
  const [file, shot, minSvgArg] = process.argv.slice(2);
  if (!file || !shot) {
    console.error('usage: node check_report.js REPORT.html SCREENSHOT.png [MIN_SVG]');
    process.exit(2);
  }
  const url = 'file://' + path.resolve(file);
  const minSvg = Number(minSvgArg || 0);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
           '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  const requests = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('dialog', async (d) => { problems.push(`dialog opened: ${d.message()}`); await d.dismiss(); });
    page.on('request', (r) => requests.push(r.url()));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
    const resp = await page.goto(url, { waitUntil: 'load' });
    if (!resp) problems.push('no response for the report file');
    await page.waitForTimeout(200); // let late console messages arrive
    const facts = await page.evaluate(() => ({
      title: document.title,
      verdictRows: document.querySelectorAll('#verdict table tr').length - 1,
      sections: document.querySelectorAll('section[id^="check-"]').length,
      svgs: document.querySelectorAll('svg').length,
      bars: document.querySelectorAll('svg rect').length,
      scripts: document.querySelectorAll('script').length,
      externals: Array.from(document.querySelectorAll('[src],link[href]')).map((e) => e.getAttribute('src') || e.getAttribute('href')),
      height: document.body.scrollHeight,
    }));
    await page.screenshot({ path: shot, fullPage: true });
    const network = requests.filter((u) => u !== url);
    if (network.length) problems.push(`network requests: ${network.join(', ')}`);
    if (!facts.title.startsWith('plumb report')) problems.push(`title is '${facts.title}'`);
    if (facts.verdictRows < 1) problems.push('verdict table has no rows');
    if (facts.sections !== facts.verdictRows) problems.push(`${facts.sections} check sections for ${facts.verdictRows} verdict rows`);
    if (facts.scripts) problems.push(`${facts.scripts} script elements`);
    if (facts.externals.length) problems.push(`elements with src/href to load: ${facts.externals.join(', ')}`);
    if (facts.svgs < minSvg) problems.push(`${facts.svgs} SVG charts, expected at least ${minSvg}`);
    console.log(JSON.stringify({ url, requests: requests.length, ...facts, screenshot: shot, problems }));
  } finally {
    await browser.close();
  }
  process.exit(problems.length ? 1 : 0);
}

main().catch((err) => { console.error(err && err.stack ? err.stack : String(err)); process.exit(3); });
