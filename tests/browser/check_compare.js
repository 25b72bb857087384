// Opens a compare.html in Debian's headless chromium and checks that it
// renders with no console errors, no page errors, no dialogs and no network
// requests; that the verdict comes first; and that the charts asked for are
// there. Keeps a full-page screenshot.
// usage: node check_compare.js COMPARE.html SCREENSHOT.png [MIN_SVG] [REQUIRED_SELECTOR...]
'use strict';
const path = require('path');
const { chromium } = require('playwright-core');

async function main() {
  const [file, shot, minSvgArg, ...required] = process.argv.slice(2);
  if (!file || !shot) {
    console.error('usage: node check_compare.js COMPARE.html SCREENSHOT.png [MIN_SVG] [SELECTOR...]');
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
    if (!resp) problems.push('no response for the compare file');
    await page.waitForTimeout(200);
    const facts = await page.evaluate((sels) => {
      const sections = Array.from(document.querySelectorAll('section')).map((s) => s.id);
      return {
        title: document.title,
        sections,
        verdict: (document.querySelector('#verdict .badge') || {}).textContent || '',
        svgs: document.querySelectorAll('svg').length,
        scripts: document.querySelectorAll('script').length,
        externals: Array.from(document.querySelectorAll('[src],link[href]')).map((e) => e.getAttribute('src') || e.getAttribute('href')),
        missing: sels.filter((s) => !document.querySelector(s)),
        height: document.body.scrollHeight,
      };
    }, required);
    await page.screenshot({ path: shot, fullPage: true });
    const network = requests.filter((u) => u !== url);
    if (network.length) problems.push(`network requests: ${network.join(', ')}`);
    if (!facts.title.startsWith('plumb compare')) problems.push(`title is '${facts.title}'`);
    if (facts.sections[0] !== 'verdict') problems.push(`first section is '${facts.sections[0]}', not the verdict`);
    if (!facts.verdict) problems.push('no verdict badge');
    if (facts.scripts) problems.push(`${facts.scripts} script elements`);
    if (facts.externals.length) problems.push(`elements with src/href to load: ${facts.externals.join(', ')}`);
    if (facts.svgs < minSvg) problems.push(`${facts.svgs} SVG charts, expected at least ${minSvg}`);
    if (facts.missing.length) problems.push(`missing: ${facts.missing.join(', ')}`);
    console.log(JSON.stringify({ url, requests: requests.length, ...facts, screenshot: shot, problems }));
  } finally {
    await browser.close();
  }
  process.exit(problems.length ? 1 : 0);
}

main().catch((err) => { console.error(err && err.stack ? err.stack : String(err)); process.exit(3); });
