// The Korean catalogue in the words of the product brief (its glossary: the terms asserted below)
// and in one voice, so that a Korean operator reads each term one way on every page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOGUES, translate } from '../../src/i18n.js';

const ko = CATALOGUES.ko;
const having = (re) => Object.entries(ko).filter(([, v]) => re.test(v)).map(([k]) => k);

test('Korean uses the brief\'s terms: 디바이스, GPU Pool, 반려, 상황판 모드', () => {
  assert.deepEqual(having(/장치/), [], 'devices are 디바이스');
  assert.deepEqual(having(/풀/), [], 'the pool object is written GPU Pool / Pool');
  assert.deepEqual(having(/거절/), [], 'an approval is paired with 반려');
  assert.deepEqual(having(/월 모드/), [], 'wall mode is 상황판 모드');
  assert.equal(ko['wall.enter'], '상황판 모드');
  assert.equal(ko['pools.reject'], '반려');
  assert.equal(ko['state.Rejected'], '반려됨');
  assert.equal(ko['state.New'], '승인 대기');
  assert.equal(ko['pools.queue'], 'Pool 요청 및 할당');
});

test('a whole GPU is a Full GPU, and the fleet has one word of its own', () => {
  for (const k of ['ov.physical.detail', 'col.full', 'profile.full', 'pools.quotaFull']) assert.match(ko[k], /Full GPU/, k);
  // 전체 GPU would read as "total GPUs" beside a total; 전체 용량 as the fleet's capacity.
  assert.deepEqual(having(/전체 GPU|전체 용량/), []);
  for (const k of ['nav.fleet', 'page.fleet']) assert.equal(ko[k], '플릿', k);
  assert.match(ko['gpu.back'], /플릿/);
});

test('Korean speaks in one register (합니다체) throughout', () => {
  // 해요체 endings: a sentence closed on 요 (할까요? 있어요.) and the polite imperative -세요.
  assert.deepEqual(having(/요[.?!]|세요/), []);
  for (const k of ['pools.approved', 'pools.rejected', 'pools.reasonRequired']) assert.match(ko[k], /니다\.$/, `${k} is a whole sentence`);
});

test('a free MIG instance is 여유 everywhere, and health and status are different words', () => {
  assert.deepEqual(having(/빈 인스턴스|빈 칸|비어 있/), []);
  for (const k of ['mig.idle', 'mig.open', 'col.free']) assert.match(ko[k], /여유/, k);
  assert.match(ko['defrag.destroys'], /여유 인스턴스/);
  assert.notEqual(ko['col.health'], ko['col.status']);
  assert.notEqual(ko['col.health'], ko['col.state']);
});

test('a measured or unknown number never takes the counter 개', () => {
  // These take GPU counts averaged over time (2.4) or nothing yet (–).
  for (const [key, params] of [
    ['ov.used.detail', { used: '2.4', allocated: '–' }],
    ['ov.used.detail', { used: '–', allocated: '–' }],
    ['ov.used.detail', { used: '1', allocated: '3' }],
    ['pools.usageText', { util: '40%', used: '1.5', allocated: '3.75' }],
    ['billing.budgetText', { used: '12.5', limit: '100' }],
    ['pools.quotaText', { what: 'x', used: '2', limit: '–' }],
  ]) {
    const text = translate('ko', key, params);
    assert.doesNotMatch(text, /[\d.,–]개/, `${key}: ${text}`);
  }
  assert.equal(translate('ko', 'ov.used.detail', { used: '2.4', allocated: '3' }), '사용 중인 GPU 2.4 / 할당된 GPU 3 (SM 활성도 기준)');
});

test('Korean puts the count after the thing it counts', () => {
  assert.equal(translate('ko', 'count.items', { n: '4', thing: 'A100-80GB 1g.10gb' }), 'A100-80GB 1g.10gb 4개');
  assert.equal(translate('en', 'count.items', { n: '4', thing: 'A100-80GB 1g.10gb' }), '4 × A100-80GB 1g.10gb');
});
