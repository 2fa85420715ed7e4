// What the browser tests share: a gpuaas server of their own (the binary under test, a fresh
// store, static tokens), Debian's Chromium driven by playwright-core, and checks every page
// must pass (no console errors, no request to another host).
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
export const webRoot = resolve(here, '../..');
export const repoRoot = resolve(webRoot, '..');

export const TOKENS = {
  operator: 'op-token-0123456789abcdef',
  vision: 'vision-token-0123456789abcdef',
  other: 'other-token-0123456789abcdef',
};

export function binary() {
  return process.env.GPUAAS_BIN || join(repoRoot, 'build/dev/src/exe/gpuaas');
}

export function chromiumPath() {
  return process.env.CHROMIUM || '/usr/bin/chromium';
}

// Where screenshots go (not committed): GPUAAS_SCREENSHOTS or build/screenshots.
export function screenshotDir() {
  const d = process.env.GPUAAS_SCREENSHOTS || join(repoRoot, 'build/screenshots');
  mkdirSync(d, { recursive: true });
  return d;
}

// Starts `gpuaas server` on a free loopback port with the dashboard; resolves when it is ready.
export async function startServer(args = ['--demo']) {
  const dir = mkdtempSync(join(tmpdir(), 'gpuaas-web-'));
  writeFileSync(join(dir, 'tokens'),
    `${TOKENS.operator},ops,operator\n${TOKENS.vision},alice,member,vision\n${TOKENS.other},bob,member,other\n`);
  const log = join(dir, 'server.log');
  const full = ['server', ...args, '--listen', '127.0.0.1:0', '--db', `sqlite:${join(dir, 'g.db')}`,
    '--token-auth-file', join(dir, 'tokens'), '--web', join(webRoot, 'dist'), '--telemetry-interval', '2'];
  const { openSync } = await import('node:fs');
  const fd = openSync(log, 'w');
  const proc = spawn(binary(), full, { stdio: ['ignore', fd, fd] });
  let url = null;
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    const text = readFileSync(log, 'utf8');
    const m = /serving (http:\/\/127\.0\.0\.1:\d+)/.exec(text);
    if (m) { url = m[1]; break; }
    if (proc.exitCode !== null) throw new Error(`server exited: ${text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!url) throw new Error(`server did not start: ${readFileSync(log, 'utf8')}`);
  const server = {
    url, dir, proc,
    log: () => readFileSync(log, 'utf8'),
    async api(path, { method = 'GET', body, token = TOKENS.operator, raw = false } = {}) {
      const res = await fetch(url + path, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'Content-Type': typeof body === 'string' ? 'text/plain; version=0.0.4' : 'application/json' }),
        },
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      if (raw) return res;
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? JSON.parse(text) : null;
    },
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await new Promise((r) => proc.once('exit', r));
      }
      const text = readFileSync(log, 'utf8');
      rmSync(dir, { recursive: true, force: true });
      return { code: proc.exitCode, log: text };
    },
  };
  return server;
}

export async function launch() {
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: ['--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', '--disable-features=Translate,MediaRouter'],
  });
}

// A page that records console errors, failed requests and every request's host.
export async function openPage(browser, server, { locale = 'en-US', colorScheme = 'light', viewport = { width: 1440, height: 900 } } = {}) {
  const context = await browser.newContext({ locale, colorScheme, viewport });
  const page = await context.newPage();
  const problems = [];
  const host = new URL(server.url).host;
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (!['data:', 'blob:'].includes(u.protocol) && u.host !== host) problems.push(`request to another host: ${r.url()}`);
  });
  page.on('requestfailed', (r) => {
    const f = r.failure()?.errorText ?? '';
    if (!f.includes('ERR_ABORTED')) problems.push(`request failed: ${r.url()} ${f}`);
  });
  return { context, page, problems };
}

export async function signIn(page, server, token) {
  await page.goto(server.url + '/');
  await page.getByLabel(/API token|API 토큰/).fill(token);
  await page.getByRole('button', { name: /Sign in|로그인/ }).click();
  await page.locator('nav').first().waitFor();
}

export async function createPool(server, project, name, items, token = TOKENS.operator) {
  return server.api(`/apis/gpuaas.io/v1/namespaces/${project}/gpupools`, {
    method: 'POST', token,
    body: { apiVersion: 'gpuaas.io/v1', kind: 'GpuPool', metadata: { name, namespace: project }, spec: { items } },
  });
}

export async function createProject(server, name) {
  return server.api('/apis/gpuaas.io/v1/projects', {
    method: 'POST', body: { apiVersion: 'gpuaas.io/v1', kind: 'Project', metadata: { name }, spec: { displayName: name } },
  });
}

export async function waitFor(fn, timeoutMs = 20000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}: ${last}`);
}
