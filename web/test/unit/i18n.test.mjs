import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOGUES, detect, interpolate, translate } from '../../src/i18n.js';

const src = join(dirname(fileURLToPath(import.meta.url)), '../../src');
const placeholders = (s) => [...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

test('every language has every message, with the same placeholders', () => {
  const en = Object.keys(CATALOGUES.en).sort();
  for (const [lang, cat] of Object.entries(CATALOGUES)) {
    assert.deepEqual(Object.keys(cat).sort(), en, `${lang}: keys differ from English`);
    for (const k of en) assert.deepEqual(placeholders(cat[k]), placeholders(CATALOGUES.en[k]), `${lang}: ${k}`);
  }
});

test('every message the views ask for is in the catalogue', () => {
  const files = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else if (e.name.endsWith('.js') && !d.endsWith('messages')) files.push(join(d, e.name));
    }
  };
  walk(src);
  const missing = [];
  for (const f of files) {
    for (const m of readFileSync(f, 'utf8').matchAll(/\bt\('([a-zA-Z.]+)'/g)) {
      if (!(m[1] in CATALOGUES.en) && !m[1].endsWith('.')) missing.push(`${f}: ${m[1]}`);
    }
  }
  assert.deepEqual(missing, []);
});

test('the language comes from the browser, falling back to English', () => {
  assert.equal(detect(['ko-KR', 'en-US']), 'ko');
  assert.equal(detect(['fr-FR', 'ko']), 'ko');
  assert.equal(detect(['de-DE']), 'en');
  assert.equal(detect(undefined), 'en');
});

test('messages interpolate and unknown keys are an error', () => {
  assert.equal(interpolate('{a} of {b}', { a: 1, b: 2 }), '1 of 2');
  assert.equal(interpolate('{a} of {b}', { a: 1 }), '1 of {b}');
  assert.equal(translate('ko', 'fleet.count', { n: '3' }), 'GPU 3개');
  assert.throws(() => translate('en', 'no.such.key'));
});
