import { test } from 'node:test';
import assert from 'node:assert/strict';
import { coalescer } from '../../src/logic/coalesce.js';

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
