import { test } from 'node:test';
import assert from 'node:assert/strict';
import { roomGains } from '../../src/logic/defrag.js';

test('a plan\'s gains are the profiles whose room changes, by model, largest gain first', () => {
  const room = {
    'H200-SXM-141GB': { '1g.18gb': { now: 7, after: 7 }, '3g.71gb': { now: 1, after: 2 }, '4g.71gb': { now: 0, after: 1 }, '2g.35gb': { now: 2, after: 4 } },
    'A100-SXM4-80GB': { '7g.80gb': { now: 0, after: 1 } },
  };
  assert.deepEqual(roomGains(room).map((g) => `${g.model} ${g.profile} ${g.now}->${g.after}`), [
    'A100-SXM4-80GB 7g.80gb 0->1',
    'H200-SXM-141GB 2g.35gb 2->4',
    'H200-SXM-141GB 3g.71gb 1->2',
    'H200-SXM-141GB 4g.71gb 0->1',
  ]);
  assert.deepEqual(roomGains({}), []);
  assert.deepEqual(roomGains(undefined), []);
});
