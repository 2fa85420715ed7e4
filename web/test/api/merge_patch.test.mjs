// Property: random JSON merge patches (RFC 7386) sent to the server leave a pool exactly as
// applying the same patch to its JSON here does, with an implementation written from the RFC
// for this test; a patch the server refuses leaves the pool as it was. What the server owns
// (status, resourceVersion, managedFields) is compared separately: status never changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, createProject, createPool, TOKENS } from '../browser/harness.mjs';

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

// RFC 7386, section 2.
function mergePatch(target, patch) {
  if (!isObject(patch)) return structuredClone(patch);
  const out = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

// A small deterministic generator (mulberry32), so that a failure can be replayed by its seed.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomPatch(r) {
  const pick = (xs) => xs[Math.floor(r() * xs.length)];
  const maybe = (p = 0.5) => r() < p;
  const patch = {};
  const strings = (keys, values) => {
    const m = {};
    for (const k of keys) if (maybe(0.4)) m[k] = pick(values);
    return m;
  };
  if (maybe()) {
    patch.metadata = {};
    if (maybe(0.7)) patch.metadata.labels = maybe(0.1) ? null : strings(['team', 'tier', 'a', 'gpuaas.io/x'], ['vision', 'gold', 'x', null, '']);
    if (maybe(0.5)) patch.metadata.annotations = strings(['note', 'b', 'owner'], ['hello', 'é "quoted"', '', null]);
  }
  if (maybe(0.7)) {
    patch.spec = {};
    if (maybe(0.4)) patch.spec.workloadType = pick(['training', 'inference', 'development', 'bogus']);
    if (maybe(0.3)) patch.spec.moveIdleInstances = pick([true, false, null]);
    if (maybe(0.3)) {
      const n = 1 + Math.floor(r() * 2);
      patch.spec.items = Array.from({ length: n }, () => ({
        model: 'H200-SXM-141GB', profile: pick(['full', '1g.18gb', '9g.1tb']), count: pick([1, 2, 0]),
      }));
    }
    if (maybe(0.2)) patch.spec.cluster = pick([null, 'alpha']);
  }
  return patch;
}

// What the comparison covers: labels, annotations and spec, with the encoder's omissions (an
// empty map, moveIdleInstances false) read as the absence they are.
function userPart(obj) {
  const spec = { ...(obj.spec || {}) };
  if (spec.moveIdleInstances === false) delete spec.moveIdleInstances;
  const labels = obj.metadata?.labels || {};
  const annotations = obj.metadata?.annotations || {};
  return { labels, annotations, spec };
}

test('random merge patches leave a pool as RFC 7386 says', async () => {
  const seed = Number(process.env.MERGE_PATCH_SEED || 20261205);
  const r = rng(seed);
  // Three requests a patch, as fast as they come: above an operator's default request rate.
  const server = await startServer(['--demo', '--requests-per-second', 'operator=10000']);
  try {
    await createProject(server, 'prop');
    await createPool(server, 'prop', 'p', [{ model: 'H200-SXM-141GB', profile: 'full', count: 1 }]);
    const path = '/apis/gpuaas.io/v1/namespaces/prop/gpupools/p';
    let accepted = 0;
    let refused = 0;
    for (let i = 0; i < 150; i++) {
      const before = await server.api(path);
      const patch = randomPatch(r);
      const res = await fetch(server.url + path, {
        method: 'PATCH',
        headers: { Authorization: `Bearer ${TOKENS.operator}`, 'Content-Type': 'application/merge-patch+json' },
        body: JSON.stringify(patch),
      });
      const text = await res.text();
      const after = await server.api(path);
      const what = `seed ${seed}, patch #${i}: ${JSON.stringify(patch)} -> ${res.status} ${text}`;
      if (res.status === 200) {
        accepted++;
        let expected = mergePatch(before, patch);
        if (expected.spec && expected.spec.workloadType === undefined) expected.spec.workloadType = 'training';
        assert.deepEqual(userPart(after), userPart(expected), what);
        assert.deepEqual(userPart(JSON.parse(text)), userPart(after), what);
        assert.deepEqual(after.status, before.status, `status is the controllers': ${what}`);
      } else {
        refused++;
        assert.ok(res.status >= 400 && res.status < 500, what);
        assert.deepEqual(after, before, `a refused patch changes nothing: ${what}`);
      }
    }
    console.log(`# seed ${seed}: ${accepted} patches accepted and matched RFC 7386, ${refused} refused with nothing changed`);
    assert.ok(accepted > 30 && refused > 10, `both kinds of outcome were tried: ${accepted} accepted, ${refused} refused`);
  } finally {
    await server.stop();
  }
});
