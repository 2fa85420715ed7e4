import { test } from 'node:test';
import assert from 'node:assert/strict';
import { segments, slotStates } from '../../src/logic/mig.js';

// Instances and migRoom as GET /api/v1/fleet/gpus gives them for H200-SXM-141GB GPUs (the room
// is the catalogue's, src/catalog/room.h).
const inst = (profile, start, size, extra = {}) => ({ profile, start, size, uuid: `MIG-${profile}-${start}`, allocated: false, ...extra });
const room = (openSlots, fits = []) => ({ memorySlices: 8, openSlots, fits });
const drawn = (segs) => segs.map((s) => [s.start, s.size, s.state, s.instance?.profile]);

test('an empty GPU is one open run of every slice', () => {
  const r = room([0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(slotStates(r, []).map((s) => s.state), Array(8).fill('open'));
  assert.deepEqual(drawn(segments(r, [])), [[0, 8, 'open', undefined]]);
});

test('a free slice the server does not name open is stranded', () => {
  // Seven 1g.18gb: slice 7 is free, but no profile can start an instance over it.
  const seven = [0, 1, 2, 3, 4, 5, 6].map((s) => inst('1g.18gb', s, 1));
  const states = slotStates(room([]), seven);
  assert.ok(states.slice(0, 7).every((s, i) => s.state === 'used' && s.instance === seven[i]));
  assert.equal(states[7].state, 'stranded');
  assert.deepEqual(drawn(segments(room([]), seven)).at(-1), [7, 1, 'stranded', undefined]);
});

test('open and stranded slices alternate as the room says', () => {
  // 1g.18gb at 0, 2, 4 and 6: 1g.18gb still starts at 1, 3 and 5; nothing starts at 7.
  const used = [0, 2, 4, 6].map((s) => inst('1g.18gb', s, 1));
  assert.deepEqual(drawn(segments(room([1, 3, 5]), used)), [
    [0, 1, 'used', '1g.18gb'], [1, 1, 'open', undefined], [2, 1, 'used', '1g.18gb'], [3, 1, 'open', undefined],
    [4, 1, 'used', '1g.18gb'], [5, 1, 'open', undefined], [6, 1, 'used', '1g.18gb'], [7, 1, 'stranded', undefined],
  ]);
});

test('segments follow the instances in place, each with its own fields', () => {
  const used = [inst('4g.71gb', 0, 4), inst('3g.71gb', 4, 4, { pool: 'vision/train' })];
  const segs = segments(room([]), used);
  assert.deepEqual(drawn(segs), [[0, 4, 'used', '4g.71gb'], [4, 4, 'used', '3g.71gb']]);
  assert.equal(segs[1].instance.pool, 'vision/train');
  // Two instances of one profile side by side stay two rectangles.
  const twins = [inst('2g.35gb', 0, 2), inst('2g.35gb', 2, 2)];
  assert.deepEqual(drawn(segments(room([4, 5, 6, 7]), twins)), [[0, 2, 'used', '2g.35gb'], [2, 2, 'used', '2g.35gb'], [4, 4, 'open', undefined]]);
});

test('the slot count is the room\'s: an A30 has four', () => {
  const a30 = { memorySlices: 4, openSlots: [2, 3], fits: [{ profile: '1g.6gb', count: 2 }] };
  assert.deepEqual(drawn(segments(a30, [inst('2g.12gb', 0, 2)])), [[0, 2, 'used', '2g.12gb'], [2, 2, 'open', undefined]]);
});
