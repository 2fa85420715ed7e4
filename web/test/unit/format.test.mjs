import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ago, clock, dateTime, money, mib, number, percent, recentPeriods, watts } from '../../src/logic/format.js';
import { colour, describe, hit, layout } from '../../src/logic/heatmap.js';

test('numbers, money and units follow the locale', () => {
  assert.equal(number(10000, 'en-US'), '10,000');
  assert.equal(number(10000, 'ko-KR'), '10,000');
  assert.equal(number(null, 'en-US'), '–');
  assert.equal(percent(0.256, 'en-US'), '26%');
  assert.equal(money(3600000, 'USD', 'en-US'), '$3.60');
  assert.equal(money(3600000, 'KRW', 'ko-KR'), '₩4');
  assert.equal(money(1234500000, 'USD', 'ko-KR'), 'US$1,234.50');
  assert.equal(watts(512.4, 'en-US'), '512 W');
  assert.equal(watts(12500, 'en-US'), '12.5 kW');
  assert.equal(mib(2048, 'en-US'), '2 GiB');
  assert.equal(mib(512, 'en-US'), '512 MiB');
});

test('ago says seconds, then minutes, then hours, in the language', () => {
  const now = 1_000_000_000;
  assert.equal(ago(now - 3000, now, 'en-US'), '3s ago');
  assert.equal(ago(now - 3000, now, 'ko-KR'), '3초 전');
  assert.equal(ago(now - 600_000, now, 'en-US'), '10m ago');
  assert.equal(ago(now - 7_200_000, now, 'en-US'), '2h ago');
});

test('Korean times run on a 24-hour clock; English keeps its own', () => {
  const midnight = new Date(2026, 0, 5, 0, 4);
  const afternoon = new Date(2026, 0, 5, 15, 30);
  assert.equal(clock(midnight, 'ko-KR'), '00:04');
  assert.equal(clock(afternoon, 'ko-KR'), '15:30');
  assert.match(clock(midnight, 'en-US'), /^12:04\sAM$/);
  const ko = dateTime(afternoon.toISOString(), 'ko-KR');
  assert.match(ko, /15:30/);
  assert.doesNotMatch(ko, /오전|오후|AM|PM/);
  assert.match(dateTime(afternoon.toISOString(), 'en-US'), /3:30\sPM/);
  assert.equal(dateTime(null, 'ko-KR'), '–');
});

test('recent periods step back across a year', () => {
  assert.deepEqual(recentPeriods(Date.UTC(2026, 1, 10), 3), ['2026-02', '2026-01', '2025-12']);
});

test('the heatmap holds 10,000 GPUs in cells of at least 4 px and hit-tests them', () => {
  const l = layout(10000, 1200);
  assert.ok(l.cell >= 4 && l.cols * l.rows >= 10000);
  assert.ok(l.height <= 600, `height ${l.height}`);
  const small = layout(144, 1200);
  assert.equal(small.cell, 28);
  const pitch = small.cell + small.gap;
  assert.equal(hit(small, 144, 1, 1), 0);
  assert.equal(hit(small, 144, pitch * 3 + 2, pitch + 2), small.cols + 3);
  assert.equal(hit(small, 144, small.cell + 0.5, 1), -1, 'the gap is no cell');
  assert.equal(hit(small, 144, 1, pitch * (small.rows + 1)), -1);
});

test('the colour scale runs from light to dark and shows missing readings apart', () => {
  const l = (c) => Number(/(\d+(\.\d+)?)%\)$/.exec(c)[1]);
  assert.ok(l(colour(0, false)) > l(colour(1, false)));
  assert.ok(l(colour(0, true)) < l(colour(1, true)));
  assert.ok(!colour(null, false).startsWith('hsl'));
  assert.deepEqual(describe({ total: 3, health: ['Healthy', 'Unhealthy', 'Healthy'], allocated: [0, 1, 0.5] }),
    { total: 3, unhealthy: 1, allocated: 2, free: 1 });
});
