import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fitsMore, segments, slotStates } from '../../src/logic/mig.js';

// H200-SXM-141GB as GET /api/v1/catalog gives it (placements from NVIDIA's MIG user guide).
const H200 = {
  name: 'H200-SXM-141GB', computeSlices: 7, memorySlices: 8,
  profiles: [
    { name: '1g.18gb', computeSlices: 1, memorySlices: 1, maxCount: 7, starts: [0, 1, 2, 3, 4, 5, 6] },
    { name: '1g.18gb+me', computeSlices: 1, memorySlices: 1, maxCount: 1, starts: [0, 1, 2, 3, 4, 5, 6] },
    { name: '1g.35gb', computeSlices: 1, memorySlices: 2, maxCount: 4, starts: [0, 2, 4, 6] },
    { name: '2g.35gb', computeSlices: 2, memorySlices: 2, maxCount: 3, starts: [0, 2, 4] },
    { name: '3g.71gb', computeSlices: 3, memorySlices: 4, maxCount: 2, starts: [0, 4] },
    { name: '4g.71gb', computeSlices: 4, memorySlices: 4, maxCount: 1, starts: [0] },
    { name: '7g.141gb', computeSlices: 7, memorySlices: 8, maxCount: 1, starts: [0] },
  ],
};
const inst = (profile, start, size, extra = {}) => ({ profile, start, size, uuid: `MIG-${profile}-${start}`, allocated: false, ...extra });

test('an empty GPU is all open and fits every profile up to its own limit', () => {
  assert.deepEqual(slotStates(H200, []).map((s) => s.state), Array(8).fill('open'));
  const fits = Object.fromEntries(fitsMore(H200, []).map((f) => [f.profile, f.count]));
  assert.deepEqual(fits, { '1g.18gb': 7, '1g.18gb+me': 1, '1g.35gb': 4, '2g.35gb': 3, '3g.71gb': 2, '4g.71gb': 1, '7g.141gb': 1 });
});

test('seven 1g instances strand the last memory slice', () => {
  const seven = [0, 1, 2, 3, 4, 5, 6].map((s) => inst('1g.18gb', s, 1));
  const states = slotStates(H200, seven);
  assert.equal(states[7].state, 'stranded');
  assert.ok(states.slice(0, 7).every((s) => s.state === 'used'));
  assert.deepEqual(fitsMore(H200, seven), []);
});

test('compute slices, not memory, end a layout: 4g + 2g leave one slice of compute', () => {
  const used = [inst('4g.71gb', 0, 4), inst('2g.35gb', 4, 2)];
  const states = slotStates(H200, used).map((s) => s.state);
  // 1g.35gb at 6 still covers slices 6 and 7 (4g.71gb + 2g.35gb + 1g.35gb is a legal layout).
  assert.deepEqual(states, ['used', 'used', 'used', 'used', 'used', 'used', 'open', 'open']);
  // With 1g.18gb at 6, compute is spent and slice 7 is stranded.
  const full = slotStates(H200, [...used, inst('1g.18gb', 6, 1)]).map((s) => s.state);
  assert.equal(full[7], 'stranded');
  const fits = Object.fromEntries(fitsMore(H200, used).map((f) => [f.profile, f.count]));
  assert.deepEqual(fits, { '1g.18gb': 1, '1g.18gb+me': 1, '1g.35gb': 1 });
});

test('segments follow the instances in place and merge free runs of one state', () => {
  const used = [inst('3g.71gb', 4, 4, { pool: 'vision/train' })];
  const segs = segments(H200, used);
  assert.deepEqual(segs.map((s) => [s.start, s.size, s.state, s.instance?.profile]), [
    [0, 4, 'open', undefined],
    [4, 4, 'used', '3g.71gb'],
  ]);
  assert.equal(segs[1].instance.pool, 'vision/train');
});

test('a size missing from the API is taken from the profile', () => {
  const segs = segments(H200, [{ profile: '2g.35gb', start: 2, uuid: 'MIG-x' }]);
  assert.deepEqual(segs.map((s) => [s.start, s.size, s.state]), [[0, 2, 'open'], [2, 2, 'used'], [4, 4, 'open']]);
});
