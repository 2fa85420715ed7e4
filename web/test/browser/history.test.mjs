// The dashboard when the telemetry history (--telemetry-query) does not answer: a GPU's charts
// reach past gpuaas's hot window, the server answers those requests 503 with the reason, and the
// page says the history is unavailable while it keeps drawing the live hour from gpuaas itself.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { TOKENS, launch, openPage, signIn, startServer, waitFor } from './harness.mjs';

// A loopback port nothing listens on: the receiver is down.
async function closedPort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

let server, browser, receiver;

describe('GPU Dashboard, telemetry history down', () => {
  before(async () => {
    receiver = `http://127.0.0.1:${await closedPort()}`;
    server = await startServer(['--demo', '--telemetry-query', receiver, '--telemetry-query-timeout', '1']);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    const r = await server?.stop();
    if (r) assert.doesNotMatch(r.log, /ERROR: AddressSanitizer|runtime error:/);
  });

  test('a GPU page says the history is unavailable and still charts the live hour, in either range', async () => {
    // A GPU with readings (the demo's simulated agents report every two seconds).
    const gpu = await waitFor(async () => {
      const rows = await server.api('/api/v1/fleet/gpus?limit=50');
      return rows.items.find((g) => g.powerW !== null && g.powerW !== undefined) ?? null;
    }, 30000, 'a GPU with readings');
    // The API: the day reaches back past the hot window, so the history is asked and is down.
    const day = await server.api(`/api/v1/metrics/query?series=gpu:${gpu.uuid}:power_w&from=${Math.floor(Date.now() / 1000) - 86400}&step=600`, { raw: true });
    assert.equal(day.status, 503);
    assert.match(await day.text(), new RegExp(`telemetry history at ${receiver.replace(/[.]/g, '\\.')} is unavailable`));

    const { page, problems, context } = await openPage(browser, server);
    await signIn(page, server, TOKENS.operator);
    await page.goto(`${server.url}/fleet/gpus/${gpu.uuid}`);
    await page.getByTestId('history-unavailable').waitFor({ timeout: 30000 });
    assert.match(await page.getByTestId('history-unavailable').innerText(), /telemetry history is unavailable/);
    assert.match(await page.getByTestId('history-unavailable').innerText(), /could not connect/);
    // The live hour is charted.
    const power = page.getByTestId('chart-power');
    await power.waitFor();
    assert.match(await power.locator('canvas').getAttribute('aria-label'), /last hour/);
    // Seven days: the same, and the range shows as chosen.
    await page.getByRole('button', { name: '7 days' }).click();
    assert.equal(await page.getByRole('button', { name: '7 days' }).getAttribute('aria-pressed'), 'true');
    await page.getByTestId('history-unavailable').waitFor();
    await page.getByTestId('chart-power').waitFor();
    // The only failed loads are the history's 503s.
    const others = problems.filter((p) => !/status of 503/.test(p));
    assert.deepEqual(others, [], others.join('\n'));
    await context.close();
  });
});
