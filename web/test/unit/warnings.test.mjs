import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseWarnings } from '../../src/logic/warnings.js';

test('warnings are the quoted texts, escapes given back, several joined by fetch', () => {
  assert.deepEqual(parseWarnings(null), []);
  assert.deepEqual(parseWarnings(''), []);
  assert.deepEqual(parseWarnings('299 - "unknown field \\"spec.quotta\\""'), ['unknown field "spec.quotta"']);
  assert.deepEqual(parseWarnings('299 - "a, b", 299 - "back\\\\slash"'), ['a, b', 'back\\slash']);
});
