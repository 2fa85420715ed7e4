import { test } from 'node:test';
import assert from 'node:assert/strict';
import { translate } from '../../src/i18n.js';
import { fitsNow, fitsNowTable, itemsText, poolDemand, poolState, profileSize } from '../../src/logic/pools.js';
import { quotaUse } from '../../src/logic/quota.js';
import { invoiceTotals } from '../../src/logic/billing.js';

const cond = (type, status = 'True') => ({ type, status });
const pool = (items, status = {}) => ({ metadata: { name: 'p', namespace: 'vision' }, spec: { items }, status });

test('the state of a pool follows its approval and conditions', () => {
  assert.equal(poolState(pool([])), 'New');
  assert.equal(poolState(pool([], { approval: { approved: false, reason: 'no' } })), 'Rejected');
  assert.equal(poolState(pool([], { approval: { approved: true } })), 'Approved');
  assert.equal(poolState(pool([], { approval: { approved: true }, conditions: [cond('Ready')] })), 'Ready');
  assert.equal(poolState(pool([], { approval: { approved: true }, conditions: [cond('Ready', 'False')] })), 'Approved');
  assert.equal(poolState(pool([], { approval: { approved: true }, conditions: [cond('Ready'), cond('Released')] })), 'Released');
});

test('a request fits now when every model and profile has enough available devices', () => {
  const by = [
    { model: 'H200-SXM-141GB', profile: 'full', count: 8, allocated: 2, free: 6, available: 5 },
    { model: 'H200-SXM-141GB', profile: '3g.71gb', count: 4, allocated: 0, free: 4, available: 4 },
  ];
  const p = pool([
    { model: 'H200-SXM-141GB', profile: 'full', count: 3 },
    { model: 'H200-SXM-141GB', profile: 'full', count: 2 },
    { model: 'H200-SXM-141GB', profile: '3g.71gb', count: 4 },
  ]);
  assert.deepEqual(poolDemand(p), [
    { model: 'H200-SXM-141GB', profile: 'full', count: 5 },
    { model: 'H200-SXM-141GB', profile: '3g.71gb', count: 4 },
  ]);
  assert.deepEqual(fitsNow(p, by), { fits: true, short: [] });
  const big = pool([{ model: 'H200-SXM-141GB', profile: 'full', count: 6 }, { model: 'A100-80GB', profile: '1g.10gb', count: 1 }]);
  assert.deepEqual(fitsNow(big, by), {
    fits: false,
    short: [
      { model: 'H200-SXM-141GB', profile: 'full', count: 6, available: 5 },
      { model: 'A100-80GB', profile: '1g.10gb', count: 1, available: 0 },
    ],
  });
});

test('fits-now rows put whole GPUs first, then larger profiles', () => {
  const rows = fitsNowTable([
    { model: 'B', profile: '1g.18gb', count: 7, available: 7 },
    { model: 'A', profile: '3g.40gb', count: 2, available: 1 },
    { model: 'B', profile: 'full', count: 2, available: 0 },
    { model: 'B', profile: '3g.71gb', count: 2, available: 2 },
  ]);
  assert.deepEqual(rows.map((r) => `${r.model} ${r.profile} ${r.available}`), ['A 3g.40gb 1', 'B full 0', 'B 3g.71gb 2', 'B 1g.18gb 7']);
  assert.equal(profileSize('7g.141gb'), 7);
  assert.equal(profileSize('1g.18gb+me'), 1);
});

test('quota counts approved pools: whole GPUs and MIG compute slices per model', () => {
  const project = { spec: { quota: { fullGpus: { 'H200-SXM-141GB': 4 }, migComputeSlices: { 'H200-SXM-141GB': 14 } } } };
  const pools = [
    pool([{ model: 'H200-SXM-141GB', profile: 'full', count: 2 }, { model: 'H200-SXM-141GB', profile: '3g.71gb', count: 2 }], { approval: { approved: true }, conditions: [cond('Ready')] }),
    pool([{ model: 'H200-SXM-141GB', profile: 'full', count: 9 }]),  // New: not counted
    pool([{ model: 'H200-SXM-141GB', profile: '2g.35gb', count: 1 }], { approval: { approved: true } }),
  ];
  assert.deepEqual(quotaUse(project, pools), [
    { model: 'H200-SXM-141GB', kind: 'full', used: 2, limit: 4 },
    { model: 'H200-SXM-141GB', kind: 'slices', used: 8, limit: 14 },
  ]);
  assert.deepEqual(quotaUse({ spec: {} }, pools), []);
});

test('used GPU-hours are summed over lines with readings only', () => {
  assert.deepEqual(invoiceTotals({ lines: [{ usedGpuHours: 1.5 }, {}, { usedGpuHours: 2 }] }), { used: 3.5 });
  assert.deepEqual(invoiceTotals({ lines: [{}] }), { used: null });
});

test('a request reads as counts, models and profiles', () => {
  const p = pool([{ model: 'H200-SXM-141GB', profile: 'full', count: 2 }, { model: 'H200-SXM-141GB', profile: '3g.71gb', count: 4 }]);
  assert.equal(itemsText(p, 'whole GPU'), '2 × H200-SXM-141GB whole GPU, 4 × H200-SXM-141GB 3g.71gb');
});

test('a request reads in the language\'s order of count and thing', () => {
  const p = pool([{ model: 'H200-SXM-141GB', profile: 'full', count: 2 }, { model: 'A100-80GB', profile: '1g.10gb', count: 4 }]);
  const say = (lang) => (n, thing) => translate(lang, 'count.items', { n, thing });
  assert.equal(itemsText(p, translate('ko', 'profile.full'), say('ko')), 'H200-SXM-141GB Full GPU 2개, A100-80GB 1g.10gb 4개');
  assert.equal(itemsText(p, translate('en', 'profile.full'), say('en')), '2 × H200-SXM-141GB whole GPU, 4 × A100-80GB 1g.10gb');
});
