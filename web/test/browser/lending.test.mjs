// Lending on the dashboard: a pool's lending switch turns lending on through the API, its details
// list what another project's preemptible work borrows from it, a reservation shows on the
// timeline with its window, and the fleet page marks the lent GPU.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TOKENS, createProject, launch, openPage, signIn, startServer, waitFor } from './harness.mjs';

let server, browser;

describe('GPU Dashboard, lending', () => {
  before(async () => {
    server = await startServer(['--demo']);
    browser = await launch();
  });

  after(async () => {
    await browser?.close();
    const r = await server?.stop();
    if (r) assert.doesNotMatch(r.log, /ERROR: AddressSanitizer|runtime error:/);
  });

  test('the switch lends a pool, its details show the loan, and a reservation is on the timeline', async () => {
    await createProject(server, 'lender');
    await createProject(server, 'borrower');
    const pools = '/apis/gpuaas.io/v1/namespaces/lender/gpupools';
    await server.api(pools, {
      method: 'POST',
      body: { apiVersion: 'gpuaas.io/v1', kind: 'GpuPool', metadata: { name: 'train', namespace: 'lender' },
        spec: { items: [{ model: 'H100-SXM5-80GB', profile: 'full', count: 1 }], lending: { enabled: false, idleAfterSeconds: 0, reclaimGraceSeconds: 5 } } },
    });
    await server.api(`${pools}/train/approval`, { method: 'PUT', body: { approve: true, reason: 'test' } });
    const start = new Date(Date.now() + 3 * 86400 * 1000);
    start.setUTCMilliseconds(0);
    const end = new Date(start.getTime() + 2 * 86400 * 1000);
    await server.api(pools, {
      method: 'POST',
      body: { apiVersion: 'gpuaas.io/v1', kind: 'GpuPool', metadata: { name: 'eval', namespace: 'lender' },
        spec: { items: [{ model: 'A100-80GB', profile: 'full', count: 1 }], startTime: start.toISOString().replace('.000Z', 'Z'), endTime: end.toISOString().replace('.000Z', 'Z') } },
    });
    await waitFor(async () => {
      const p = await server.api(`${pools}/train`);
      return (p.status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
    }, 30000, 'pool train Ready');

    const { page, problems, context } = await openPage(browser, server);
    await signIn(page, server, TOKENS.operator);
    await page.goto(`${server.url}/pools`);
    await page.getByRole('button', { name: 'Details of lender/train' }).click();
    const lending = page.getByTestId('pool-lending');
    await lending.waitFor();
    assert.match(await lending.innerText(), /Does not lend/);
    // Switched on from the page: the API's pool lends.
    await page.getByTestId('lending-switch').click();
    await waitFor(async () => (await server.api(`${pools}/train`)).spec.lending?.enabled === true, 10000, 'lending on');
    await page.getByText(/Lends devices idle for 0 s/).waitFor();

    // Another project's preemptible workload borrows the GPU; the details list the loan.
    await server.api('/apis/gpuaas.io/v1/namespaces/borrower/workloads', {
      method: 'POST',
      body: { apiVersion: 'gpuaas.io/v1', kind: 'Workload', metadata: { name: 'sweep', namespace: 'borrower' },
        spec: { resources: { 'nvidia.com/gpu': 1 }, priorityClassName: 'preemptible', model: 'H100-SXM5-80GB' } },
    });
    const lent = page.getByTestId('lent-devices');
    await lent.waitFor({ timeout: 20000 });
    assert.match(await lent.innerText(), /borrower\/sweep/);

    // The reservation, on the timeline with its window.
    const row = page.getByTestId('reservations').locator('li[data-pool="lender/eval"]');
    await row.waitFor();
    assert.match(await row.innerText(), /Reserved from/);

    // The fleet page marks the lent GPU with its borrower, and no other.
    const sweep = await server.api('/apis/gpuaas.io/v1/namespaces/borrower/workloads/sweep');
    const uuid = sweep.status.devices[0].gpuUUID;
    await page.goto(`${server.url}/fleet`);
    await page.getByRole('searchbox').fill(uuid);
    const badge = page.getByTestId('gpu-table').getByTestId('lent');
    await badge.waitFor({ timeout: 10000 });
    assert.equal(await badge.count(), 1);
    assert.equal((await badge.innerText()).trim(), 'lent to borrower');
    assert.match(await badge.getAttribute('title'), /lender\/train/);
    const fleet = await server.api('/api/v1/fleet/gpus?limit=20000');
    assert.deepEqual(fleet.items.filter((g) => g.lent.length > 0).map((g) => g.uuid), [uuid]);
    assert.deepEqual(problems, [], problems.join('\n'));
    await context.close();
  });
});
