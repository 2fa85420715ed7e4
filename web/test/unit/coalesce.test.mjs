import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coalescer, refresher } from '../../src/logic/coalesce.js';

// Timers driven by hand: advance(ms) runs what is due.
function fakeTimers() {
  let now = 0, id = 0;
  const due = new Map();
  return {
    setTimeout(fn, ms) { due.set(++id, { at: now + ms, fn }); return id; },
    clearTimeout(i) { due.delete(i); },
    advance(ms) {
      now += ms;
      for (const [i, t] of [...due]) if (t.at <= now) { due.delete(i); t.fn(); }
    },
  };
}

test('a burst of changes makes one refresh', () => {
  const timers = fakeTimers();
  let fired = 0;
  const c = coalescer(1000, () => fired++, timers);
  for (let i = 0; i < 50; i++) { c.poke(); timers.advance(10); }  // 500 ms of changes
  assert.equal(fired, 0);
  timers.advance(500);
  assert.equal(fired, 1);
  timers.advance(5000);
  assert.equal(fired, 1);
});

test('a steady stream refreshes once a window, never starved', () => {
  const timers = fakeTimers();
  let fired = 0;
  const c = coalescer(1000, () => fired++, timers);
  for (let i = 0; i < 100; i++) { c.poke(); timers.advance(100); }  // 10 s of changes
  assert.ok(fired >= 9 && fired <= 10, `${fired} refreshes`);
});

test('cancel drops the pending refresh', () => {
  const timers = fakeTimers();
  let fired = 0;
  const c = coalescer(1000, () => fired++, timers);
  c.poke();
  assert.equal(c.pending, true);
  c.cancel();
  timers.advance(2000);
  assert.equal(fired, 0);
  assert.equal(c.pending, false);
});

// A load that ends when the test says.
function gate() {
  const started = [];
  const load = () => new Promise((resolve) => started.push(resolve));
  return { load, started };
}
const settle = () => new Promise((r) => setTimeout(r, 0));

test('a refresh asked while one loads runs once after it, never beside it', async () => {
  const { load, started } = gate();
  const r = refresher(load);
  r.ask();
  await settle();
  assert.equal(started.length, 1);
  r.ask();
  r.ask();
  r.ask();
  await settle();
  assert.equal(started.length, 1, 'none beside the one in flight');
  started[0]();
  await settle();
  assert.equal(started.length, 2, 'one more for all that were asked');
  started[1]();
  await settle();
  assert.equal(started.length, 2);
  assert.equal(r.busy, false);
});

test('a failed load lets the next one run; stop drops what was asked', async () => {
  let n = 0;
  const r = refresher(() => { n++; return Promise.reject(new Error('down')); });
  r.ask();
  await settle();
  r.ask();
  await settle();
  assert.equal(n, 2);
  const { load, started } = gate();
  const s = refresher(load);
  s.ask();
  await settle();
  s.ask();
  s.stop();
  started[0]();
  await settle();
  assert.equal(started.length, 1);
  s.ask();
  await settle();
  assert.equal(started.length, 1);
});
