import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEvent, followKind, itemsOf, later, lineSplitter, listed } from '../../src/logic/watchlist.js';

// Objects and events as the server writes them (src/api/internal/watch.cc).
const pool = (ns, name, rv, state = 'New') => ({ apiVersion: 'gpuaas.io/v1', kind: 'GpuPool', metadata: { namespace: ns, name, resourceVersion: String(rv) }, status: { state } });
const ev = (type, object) => ({ type, object });
const bookmark = (rv) => ev('BOOKMARK', { kind: 'GpuPool', apiVersion: 'gpuaas.io/v1', metadata: { resourceVersion: String(rv) } });
const expired = ev('ERROR', { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version: 3', reason: 'Expired', code: 410 });
const names = (state) => itemsOf(state).map((o) => `${o.metadata.namespace}/${o.metadata.name}@${o.metadata.resourceVersion}`);
const line = (e) => JSON.stringify(e) + '\n';

test('a list, then added, modified and deleted objects, in the API\'s order', () => {
  const s = listed({ items: [pool('vision', 'train', 5), pool('rival', 'big', 4)], metadata: { resourceVersion: '7' } });
  assert.equal(s.resourceVersion, '7');
  assert.deepEqual(names(s), ['rival/big@4', 'vision/train@5']);
  assert.equal(applyEvent(s, ev('ADDED', pool('vision', 'infer', 8))), 'changed');
  assert.equal(applyEvent(s, ev('MODIFIED', pool('vision', 'train', 9, 'Ready'))), 'changed');
  assert.equal(applyEvent(s, ev('DELETED', pool('rival', 'big', 4))), 'changed');
  assert.deepEqual(names(s), ['vision/infer@8', 'vision/train@9']);
  assert.equal(itemsOf(s)[1].status.state, 'Ready');
  // A deleted object comes as it was last: the list's resourceVersion stays at the newest seen.
  assert.equal(s.resourceVersion, '9');
});

test('bookmarks move the resourceVersion only, never back', () => {
  const s = listed({ items: [pool('vision', 'train', 5)], metadata: { resourceVersion: '12' } });
  assert.equal(applyEvent(s, bookmark(10)), 'progress');
  assert.equal(s.resourceVersion, '12');
  assert.equal(applyEvent(s, bookmark(30)), 'progress');
  assert.equal(s.resourceVersion, '30');
  assert.deepEqual(names(s), ['vision/train@5']);
});

test('events the list already had are skipped, and a deletion older than the object held', () => {
  // The server may send again, right after the list, changes the list had.
  const s = listed({ items: [pool('vision', 'train', 9, 'Ready')], metadata: { resourceVersion: '9' } });
  assert.equal(applyEvent(s, ev('MODIFIED', pool('vision', 'train', 8, 'Approved'))), 'progress');
  assert.equal(itemsOf(s)[0].status.state, 'Ready');
  // Deleted at 10 and created again at 11, seen by the list: the old deletion leaves it.
  const again = listed({ items: [pool('vision', 'train', 11)], metadata: { resourceVersion: '11' } });
  assert.equal(applyEvent(again, ev('DELETED', pool('vision', 'train', 9))), 'progress');
  assert.deepEqual(names(again), ['vision/train@11']);
  // Deleting what is not held changes nothing; adding what is held replaces it.
  assert.equal(applyEvent(again, ev('DELETED', pool('vision', 'gone', 12))), 'progress');
  assert.equal(applyEvent(again, ev('ADDED', pool('vision', 'train', 13, 'Ready'))), 'changed');
  assert.deepEqual(names(again), ['vision/train@13']);
  assert.equal(again.resourceVersion, '13');
});

test('an ERROR with code 410 asks for a new list, another ERROR for a backoff first', () => {
  const s = listed({ items: [], metadata: { resourceVersion: '3' } });
  assert.equal(applyEvent(s, expired), 'relist');
  assert.equal(applyEvent(s, ev('ERROR', { kind: 'Status', code: 500, reason: 'InternalError' })), 'error');
  assert.equal(applyEvent(s, { type: 'SOMETHING' }), 'ignored');
  assert.equal(applyEvent(s, ev('ADDED', { kind: 'GpuPool', metadata: {} })), 'ignored');
});

test('a kind followed for its changes holds no objects but tracks the resourceVersion', () => {
  const s = listed({ items: [pool('', 'gpu-1', 3)], metadata: { resourceVersion: '3', continue: 'x' } }, { keep: false });
  assert.equal(s.objects, null);
  assert.equal(applyEvent(s, ev('MODIFIED', pool('', 'gpu-1', 4))), 'changed');
  assert.equal(applyEvent(s, bookmark(6)), 'progress');
  assert.equal(s.resourceVersion, '6');
  assert.deepEqual(itemsOf(s), []);
});

test('resourceVersions compare as numbers', () => {
  assert.equal(later('10', '9'), true);
  assert.equal(later('9', '10'), false);
  assert.equal(later('5', ''), true);
  assert.equal(later('', '5'), false);
});

test('lines are split across chunks', () => {
  const l = lineSplitter();
  assert.deepEqual(l.push('{"type":"ADD'), []);
  assert.deepEqual(l.push('ED"}\n{"type":"BOOKMARK"}\n\n{"ty'), ['{"type":"ADDED"}', '{"type":"BOOKMARK"}']);
  assert.deepEqual(l.push('pe":"X"}\n'), ['{"type":"X"}']);
});

// followKind against scripted answers: each list() and watch() call takes the next one; when
// the script runs out the signal aborts.
function script({ lists, watches }) {
  const ctl = new AbortController();
  const log = [];
  const next = (queue, what) => {
    if (queue.length === 0) {
      ctl.abort();
      throw new Error('done');
    }
    const a = queue.shift();
    log.push(what);
    if (a instanceof Error) throw a;
    return a;
  };
  const io = {
    signal: ctl.signal,
    list: async () => next(lists, 'list'),
    watch: async (rv) => {
      const w = next(watches, `watch@${rv}`);
      return { status: w.status ?? 200, chunks: (async function* () { for (const c of w.chunks ?? []) yield c; })() };
    },
    sleep: async (ms) => { log.push(`sleep ${ms}`); },
    publish: (state, why) => log.push(`${why}: ${names(state).join(' ')}`),
    changed: () => log.push('changed'),
    health: (ok) => log.push(ok ? 'up' : 'down'),
  };
  return { io, log };
}

test('follow: list once, apply each chunk, watch again from where the last one ended', async () => {
  const { io, log } = script({
    lists: [{ items: [pool('vision', 'train', 5)], metadata: { resourceVersion: '5' } }],
    watches: [
      { chunks: [line(bookmark(5)), line(ev('MODIFIED', pool('vision', 'train', 6, 'Ready'))) + line(ev('ADDED', pool('vision', 'b', 7))).slice(0, 20), line(ev('ADDED', pool('vision', 'b', 7))).slice(20)] },
      { chunks: [line(bookmark(9))] },
    ],
  });
  await followKind(io);
  assert.deepEqual(log, [
    'list', 'listed: vision/train@5',
    'watch@5', 'up', 'events: vision/train@6', 'changed', 'events: vision/b@7 vision/train@6', 'changed',
    'watch@7', 'up',
  ]);
});

test('follow: 410, as an answer or an ERROR event, lists again at once', async () => {
  const { io, log } = script({
    lists: [
      { items: [pool('vision', 'train', 5)], metadata: { resourceVersion: '5' } },
      { items: [], metadata: { resourceVersion: '40' } },
      { items: [pool('vision', 'c', 41)], metadata: { resourceVersion: '41' } },
    ],
    watches: [{ chunks: [line(bookmark(5)), line(expired)] }, { status: 410 }, { chunks: [] }],
  });
  await followKind(io);
  assert.deepEqual(log, [
    'list', 'listed: vision/train@5', 'watch@5', 'up',
    'list', 'listed: ', 'changed', 'watch@40',
    'list', 'listed: vision/c@41', 'changed', 'watch@41',
    // a stream that ends without a line is a failure
    'down', 'sleep 1000',
  ]);
});

test('follow: a broken watch or list backs off, doubling to 15 s, and says so', async () => {
  const gone = new Error('network');
  const { io, log } = script({
    lists: [{ items: [], metadata: { resourceVersion: '1' } }, gone, gone, gone, gone, gone, { items: [], metadata: { resourceVersion: '2' } },
      { items: [], metadata: { resourceVersion: '2' } }],
    watches: [gone, { status: 500 }, { chunks: [line(bookmark(3))] }],
  });
  await followKind(io);
  assert.deepEqual(log.filter((l) => l.startsWith('sleep') || l === 'down' || l === 'up' || l.startsWith('watch')), [
    'watch@1', 'down', 'sleep 1000',
    'down', 'sleep 2000', 'down', 'sleep 4000', 'down', 'sleep 8000', 'down', 'sleep 15000', 'down', 'sleep 15000',
    'watch@2', 'down', 'sleep 15000',
    'watch@2', 'up',
  ]);
});
