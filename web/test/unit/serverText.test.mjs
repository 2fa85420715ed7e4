// Server codes worded in English and Korean: every code the server sends has a wording in both,
// parameters reach the text formatted for the locale, and what has no wording shows its code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CATALOGUES } from '../../src/i18n.js';
import {
  alertAction, alertEvent, alertSource, conditionReason, conditionType, poolReason, say, severity, showsServerText,
  suggestion, workloadReason, xidOf,
} from '../../src/logic/serverText.js';

// The XIDs the server's catalogue knows (src/telemetry/health.cc LookupXid).
const XIDS = [13, 31, 43, 45, 46, 48, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 140, 143, 158];
const ACTIONS = ['None', 'RestartApplication', 'ResetWhenConvenient', 'ResetGpu', 'RebootNode', 'MemoryError', 'CheckNvlink',
  'Investigate', 'DrainPeerToPeer', 'DrainAndReset', 'ReplaceGpu', 'ResetWhenIdle', 'CheckCooling', 'ResetClears',
  'RaiseBudget', 'ReviewPools'];
const SOURCES = ['XID 79', 'ECC', 'RowRemap', 'RecoveryAction', 'Temperature', 'Reset', 'Restored', 'Budget'];
const CONDITION_TYPES = ['Healthy', 'DriverHealthy', 'MemoryErrors', 'ResetRequired', 'Overheating'];
const CONDITION_REASONS = ['Healthy', 'DriverReportedHealthy', 'DriverUnhealthy', 'MemoryErrors', 'ResetRequired', 'Unhealthy',
  'Xid79', 'RowRemapFailure', 'DoubleBitEccErrors', 'NoUncorrectableErrors', 'RecoveryAction', 'ResetWhenConvenient',
  'NoResetNeeded', 'Overheating', 'TemperatureNormal'];
const POOL_REASONS = ['AwaitingApproval', 'Approved', 'Rejected', 'Allocated', 'Reallocated', 'Unschedulable', 'Unresolvable',
  'ReplacingFailedDevices', 'NotAllocated', 'Provisioning', 'WaitingForMigLayout', 'MigLayoutFailed', 'Provisioned', 'Ready',
  'Released', 'Releasing', 'EndingRuns', 'DeviceFailed', 'Replaced'];
const WORKLOAD_REASONS = ['Queued', 'Admitted', 'Preempted', 'Deleted', 'PoolReleased', 'PoolNotReady', 'DeviceFailed'];
const BUDGET = { percent: 85, spent: 1234.5, budget: 1500, unit: 'USD', month: '2026-12' };

// Alerts as GET /api/v1/alerts sends them, one per event code (with and without its parameters).
const ALERTS = [
  ...XIDS.map((x) => ({ source: `XID ${x}`, reason: `Xid${x}`, params: { xid: x } })),
  { source: 'ECC', condition: 'MemoryErrors', reason: 'DoubleBitEccErrors', params: { count: 2 } },
  { source: 'ECC', condition: 'MemoryErrors', reason: 'DoubleBitEccErrors', params: { count: 3, lifetime: 1 } },
  { source: 'RowRemap', condition: 'MemoryErrors', reason: 'RowRemapFailure', params: {} },
  { source: 'RowRemap', condition: '', reason: 'RowRemapPending', params: {} },
  ...[1, 2, 3, 4, 7].map((n) => ({ source: 'RecoveryAction', condition: 'ResetRequired', reason: 'RecoveryAction', params: { recoveryAction: n } })),
  { source: 'Temperature', condition: 'Overheating', reason: 'Overheating', params: { celsius: 95, limit: 90 } },
  { source: 'Reset', condition: '', reason: 'GpuReset', params: {} },
  ...['Xid79', 'Xid48', 'RowRemapFailure', 'DoubleBitEccErrors', 'RecoveryAction'].map((reason) => ({ source: 'Restored', condition: 'MemoryErrors', reason, params: {} })),
  { source: 'Budget', condition: '', reason: 'BudgetExceeded', project: 'vision', params: { ...BUDGET, percent: 104 } },
  { source: 'Budget', condition: '', reason: 'BudgetNearlySpent', project: 'vision', params: { ...BUDGET, unit: 'GPU-hours' } },
].map((a) => ({ ...a, message: 'the server\'s English', action: 'the server\'s action' }));

// Worded from the catalogue in both languages: not the code, not the server's text, no gaps.
function assertWorded(msg, what) {
  assert.ok(msg.key && Object.hasOwn(CATALOGUES.en, msg.key), `${what}: no English wording (${msg.key})`);
  assert.ok(Object.hasOwn(CATALOGUES.ko, msg.key), `${what}: no Korean wording (${msg.key})`);
  for (const lang of ['en', 'ko']) {
    const text = say(lang, msg);
    assert.ok(text && text !== '–', `${what} (${lang}): empty`);
    assert.doesNotMatch(text, /undefined|null|NaN|\{\w+\}|server's/, `${what} (${lang}): ${text}`);
  }
  // Names (XID 79, ECC) read the same in both; words do not.
  if (!['alert.source.xid', 'alert.source.ECC'].includes(msg.key)) assert.notEqual(say('en', msg), say('ko', msg), `${what}: the same in both languages`);
}

test('every alert event and action code has an English and a Korean wording', () => {
  for (const a of ALERTS) assertWorded(alertEvent(a), `event ${a.reason}`);
  for (const code of ACTIONS) assertWorded(alertAction({ actionCode: code, params: {} }), `action ${code}`);
  for (const x of XIDS) assertWorded(alertAction({ source: `XID ${x}`, reason: `Xid${x}`, actionCode: 'ResetGpu', params: { xid: x } }), `XID ${x}'s action`);
  for (const s of SOURCES) assertWorded(alertSource(s), `source ${s}`);
  for (const s of ['info', 'warning', 'critical']) assertWorded(severity(s), `severity ${s}`);
});

test('every GPU condition, pool and workload reason has an English and a Korean wording', () => {
  for (const c of CONDITION_TYPES) assertWorded(conditionType(c), `condition ${c}`);
  for (const r of CONDITION_REASONS) assertWorded(conditionReason('Healthy', r), `condition reason ${r}`);
  for (const r of POOL_REASONS) assertWorded(poolReason(r), `pool reason ${r}`);
  for (const r of WORKLOAD_REASONS) assertWorded(workloadReason(r), `workload reason ${r}`);
  assertWorded(suggestion({ suggestionCode: 'RightSize', suggestionParams: { devices: '2', profile: '3g.71gb', peakFbUsedMiB: '9000', peakSmPercent: '20', suggested: '2g.35gb', suggestedShare: '0.29', share: '0.43' } }), 'RightSize');
});

test('an XID reads with its meaning, its number from the params or the reason', () => {
  assert.equal(say('en', alertEvent({ source: 'XID 79', reason: 'Xid79', params: { xid: 79 } })), 'XID 79: GPU has fallen off the bus');
  assert.equal(say('ko', alertEvent({ source: 'XID 79', reason: 'Xid79', params: { xid: 79 } })), 'XID 79: GPU 버스 이탈');
  assert.equal(say('ko', conditionReason('ResetRequired', 'Xid79')), 'XID 79: GPU 버스 이탈');
  assert.equal(xidOf('Xid48', {}), 48);
  assert.equal(xidOf('XID 13', null), 13);
  assert.equal(xidOf('DoubleBitEccErrors', {}), null);
  // One the catalogue does not know is named by its number alone.
  assert.equal(say('en', alertEvent({ source: 'XID 12345', reason: 'Xid12345', params: { xid: 12345 } })), 'XID 12345');
  assert.equal(say('ko', alertEvent({ source: 'XID 12345', reason: 'Xid12345', params: { xid: 12345 } })), 'XID 12345');
  assert.equal(say('ko', alertSource('XID 79')), 'XID 79');
  // NVIDIA's advice for the XID follows the action.
  const a79 = { source: 'XID 79', reason: 'Xid79', actionCode: 'RebootNode', params: { xid: 79 } };
  assert.equal(say('en', alertAction(a79)), 'Reboot the node (often a PCI Express link hardware failure)');
  assert.equal(say('ko', alertAction(a79)), '노드를 재부팅하십시오. PCI Express 링크의 하드웨어 고장인 경우가 많습니다.');
  assert.equal(say('ko', alertAction({ source: 'XID 46', reason: 'Xid46', actionCode: 'ResetGpu', params: { xid: 46 } })), 'GPU를 리셋하십시오.');
  // A restored alert says when it was recorded; its action is the reset that clears it.
  const restored = { source: 'Restored', condition: 'ResetRequired', reason: 'Xid79', actionCode: 'ResetClears', params: {} };
  assert.equal(say('ko', alertEvent(restored)), 'XID 79: GPU 버스 이탈 (gpuaas 재시작 전에 기록됨)');
  assert.equal(say('ko', alertAction(restored)), 'GPU를 리셋하면 해소됩니다.');
});

test('parameters are put in the text, formatted for the locale', () => {
  const ecc = { source: 'ECC', reason: 'DoubleBitEccErrors', params: { count: 1234 } };
  assert.equal(say('en', alertEvent(ecc)), '1,234 double-bit ECC error(s) since the driver loaded');
  assert.equal(say('ko', alertEvent(ecc)), '드라이버 로드 이후 더블 비트 ECC 오류 1,234건');
  assert.equal(say('ko', alertEvent({ ...ecc, params: { count: 5, lifetime: 1 } })), '누적 더블 비트 ECC 오류가 5건으로 늘었습니다.');
  const hot = { source: 'Temperature', reason: 'Overheating', params: { celsius: 95, limit: 90 } };
  assert.equal(say('en', alertEvent(hot)), 'GPU temperature 95 °C (at or above 90 °C)');
  assert.equal(say('ko', alertEvent(hot)), 'GPU 온도 95 °C (90 °C 이상)');
  const rec = { source: 'RecoveryAction', reason: 'RecoveryAction', params: { recoveryAction: 2 } };
  assert.equal(say('en', alertEvent(rec)), 'The driver asks for a node reboot (NVML recovery action 2)');
  assert.equal(say('ko', alertEvent(rec)), '드라이버의 복구 조치 요청: 노드 재부팅 (NVML 복구 조치 2)');
  const money = { source: 'Budget', reason: 'BudgetNearlySpent', project: 'vision', params: BUDGET };
  assert.equal(say('en', alertEvent(money)), 'Budget nearly spent: project vision has spent $1,234.50 of its $1,500.00 budget for December 2026 (85%)');
  assert.equal(say('ko', alertEvent(money)), '예산 소진 임박: 프로젝트 vision의 2026년 12월 지출이 예산 US$1,500.00 중 US$1,234.50입니다(85%).');
  const hours = { ...money, reason: 'BudgetExceeded', params: { percent: 110, spent: 1650, budget: 1500, unit: 'GPU-hours', month: '2026-11' } };
  assert.equal(say('en', alertEvent(hours)), 'Over budget: project vision has spent 1,650 GPU-hours of its 1,500 GPU-hours budget for November 2026 (110%)');
  assert.equal(say('ko', alertEvent(hours)), '예산 초과: 프로젝트 vision의 2026년 11월 지출이 예산 1,500 GPU 시간 중 1,650 GPU 시간입니다(110%).');
  const s = { suggestion: 'English', suggestionCode: 'RightSize', suggestionParams: { devices: '4', profile: 'full', peakFbUsedMiB: '12345', peakSmPercent: '12', suggested: '2g.35gb', suggestedShare: '0.29', share: '1.00' } };
  assert.equal(say('en', suggestion(s)), '4 × whole GPU never used more than 12,345 MiB of memory and 12% of a GPU\'s SMs: 2g.35gb would hold it (0.29 instead of 1 GPU each)');
  assert.equal(say('ko', suggestion(s)), 'Full GPU 4개가 메모리를 최대 12,345 MiB, GPU의 SM을 최대 12%만 사용했습니다. 2g.35gb 프로파일이면 충분합니다(디바이스당 GPU 1 대신 0.29).');
  // A missing figure is a dash, never "undefined".
  const bare = say('ko', alertEvent({ source: 'Budget', reason: 'BudgetExceeded', params: {} }));
  assert.doesNotMatch(bare, /undefined|NaN|\{/);
});

test('an unknown code shows itself; English may use the server\'s own text', () => {
  const odd = { source: 'Mystery', reason: 'SomethingNew', actionCode: 'DoSomethingNew', params: {}, message: 'something new happened', action: 'do something new' };
  assert.equal(say('ko', alertEvent(odd)), 'SomethingNew');
  assert.equal(say('ko', alertAction(odd)), 'DoSomethingNew');
  assert.equal(say('en', alertEvent(odd)), 'something new happened');
  assert.equal(say('en', alertAction(odd)), 'do something new');
  assert.equal(say('ko', alertSource('Mystery')), 'Mystery');
  assert.equal(say('ko', conditionType('NewCondition')), 'NewCondition');
  assert.equal(say('ko', conditionReason('Healthy', 'NewReason')), 'NewReason');
  assert.equal(say('en', poolReason('NewReason')), 'NewReason');
  assert.equal(say('ko', workloadReason('NewReason')), 'NewReason');
  assert.equal(say('ko', suggestion({ suggestion: 'use fewer GPUs', suggestionCode: 'Shrink' })), 'Shrink');
  assert.equal(say('en', suggestion({ suggestion: 'use fewer GPUs', suggestionCode: 'Shrink' })), 'use fewer GPUs');
  // Nothing at all, or names that are properties of every object: a dash or the code, no crash.
  for (const lang of ['en', 'ko']) {
    assert.equal(say(lang, alertEvent({})), '–');
    assert.equal(say(lang, alertEvent(null)), '–');
    assert.equal(say(lang, alertAction(undefined)), '–');
    assert.equal(say(lang, severity(undefined)), '–');
    assert.equal(say(lang, suggestion({ suggestion: '', suggestionCode: '' })), '–');
    assert.equal(say(lang, poolReason('constructor')), 'constructor');
    assert.equal(say(lang, alertSource('__proto__')), '__proto__');
    assert.equal(say(lang, null), '–');
  }
  assert.equal(showsServerText('en'), true);
  assert.equal(showsServerText('ko'), false);
});

test('the Korean wordings keep the catalogue\'s voice and the brief\'s terms', () => {
  const keys = Object.keys(CATALOGUES.ko).filter((k) => /^(xid|alert|cond|suggestion|poolReason|workloadReason|server)\./.test(k));
  assert.ok(keys.length > 100, `${keys.length} wordings`);
  for (const k of keys) {
    const v = CATALOGUES.ko[k];
    assert.doesNotMatch(v, /[A-Za-z]{2,} [a-z]{2,} [a-z]{2,}/, `${k}: an English phrase in ${v}`);
    assert.doesNotMatch(v, /장치|풀|거절|요[.?!]|세요/, `${k}: ${v}`);
    if (/^alert\.action\./.test(k) || /^xid\.note\./.test(k)) assert.match(v, /니다\.$|십시오\.$/, `${k} is a whole sentence in 합니다체`);
  }
});
