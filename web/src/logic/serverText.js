// What the server says as codes, worded in the reader's language: health alerts (the event and
// what to do), GPU conditions, the assessment's right-size suggestion, budget alerts, and pool
// and workload reasons. The server keeps its English `message` and `action` for API users; the
// dashboard words the code and its parameters instead. Framework-free.
//
// Each describer returns a message {key, values, code, text}: `key` names the wording in the
// catalogues, `values` fill it (numbers raw, formatted for the locale by `say`; a nested message
// for a part worded on its own), `code` is shown where no wording exists, and `text` is the
// server's English, which English may show in that case. `say(lang, message)` gives the string.
import { CATALOGUES, locale, translate } from '../i18n.js';
import { money, month, number, percent } from './format.js';

const has = (key) => Object.hasOwn(CATALOGUES.en, key);
const message = (key, values, code, text) => ({ key, values: values ?? {}, code: code ?? '', text: text ?? '' });
const isMessage = (v) => v !== null && typeof v === 'object' && 'key' in v && 'code' in v;

// Values that want more than a plain number.
const decimal = (v, digits) => ({ decimal: v, digits });
const withUnit = (v, unit, digits = 1) => ({ decimal: v, digits, unit });
const ratio = (v) => ({ ratio: v });
const amount = (v, unit) => ({ amount: v, unit });
const period = (v) => ({ period: v });

const finite = (v) => typeof v === 'number' && Number.isFinite(v);
// A parameter the server sent as a string ("1234"), as a number when it is one.
const numeric = (v) => (typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null);

function value(lang, v) {
  const loc = locale(lang);
  if (v === null || v === undefined) return '–';
  if (isMessage(v)) return say(lang, v);
  if (typeof v === 'number') return number(v, loc, 1);
  if (typeof v !== 'object') return String(v);
  if ('decimal' in v) {
    if (!finite(v.decimal)) return '–';
    const n = number(v.decimal, loc, v.digits);
    return v.unit ? `${n} ${v.unit}` : n;
  }
  if ('ratio' in v) return finite(v.ratio) ? percent(v.ratio, loc) : '–';
  if ('amount' in v) {
    if (!finite(v.amount)) return '–';
    if (!v.unit || v.unit === 'GPU-hours') return translate(lang, 'server.gpuHours', { n: number(v.amount, loc, 1) });
    try {
      return money(Math.round(v.amount * 1e6), v.unit, loc);
    } catch {
      return `${number(v.amount, loc, 2)} ${v.unit}`;  // not an ISO currency code
    }
  }
  if ('period' in v) {
    if (v.period === null || v.period === undefined || v.period === '') return '–';
    return /^\d{4}-(0[1-9]|1[0-2])$/.test(String(v.period)) ? month(v.period, loc) : String(v.period);
  }
  return '–';
}

// The message in `lang`; where the catalogue has no wording, the server's English (in English)
// or the code itself, and never nothing.
export function say(lang, msg) {
  if (!msg) return '–';
  if (msg.key && has(msg.key)) {
    const values = {};
    for (const [k, v] of Object.entries(msg.values ?? {})) values[k] = value(lang, v);
    return translate(lang, msg.key, values);
  }
  if (lang === 'en' && msg.text) return msg.text;
  return msg.code === undefined || msg.code === null || msg.code === '' ? '–' : String(msg.code);
}

// Whether the server's own English (a condition's message, an alert's text) reads as part of the
// page in `lang`; elsewhere it is only a tooltip.
export const showsServerText = (lang) => lang === 'en';

// The XID of "Xid79" (a reason), "XID 79" (a source) or params {xid: 79}; null for none.
export function xidOf(reason, params) {
  if (params && finite(params.xid)) return params.xid;
  const m = /^(?:Xid|XID )(\d+)$/.exec(String(reason ?? ''));
  return m ? Number(m[1]) : null;
}

// "XID 79: GPU has fallen off the bus", or "XID 12345" for one without a wording.
export function xid(n) {
  const code = `XID ${n}`;
  if (has(`xid.${n}`)) return message('server.xid', { xid: String(n), meaning: message(`xid.${n}`, {}, code) }, code);
  return message('server.xidUnknown', { xid: String(n) }, code);
}

const RECOVERY = { 1: 'GpuReset', 2: 'NodeReboot', 3: 'DrainPeerToPeer', 4: 'DrainAndReset' };

// What an alert reports: its `reason` as a code with its `params`.
export function alertEvent(a) {
  const p = a?.params ?? {};
  const text = a?.message ?? '';
  const code = a?.reason || a?.source || '';
  if (a?.source === 'Restored') {
    return message('alert.event.Restored', { event: conditionReason(a.condition, a.reason) }, code, text);
  }
  const n = xidOf(a?.reason, p);
  if (n !== null) return { ...xid(n), text };
  switch (a?.reason) {
    case 'DoubleBitEccErrors':
      if (!finite(p.count)) return message('alert.event.DoubleBitEccErrors', {}, code, text);
      return message(p.lifetime ? 'alert.event.DoubleBitEccErrors.lifetime' : 'alert.event.DoubleBitEccErrors.count',
        { count: decimal(p.count, 0) }, code, text);
    case 'RecoveryAction': {
      if (!finite(p.recoveryAction)) return message('alert.event.RecoveryAction', {}, code, text);
      const what = RECOVERY[p.recoveryAction] ?? 'Unknown';
      return message('alert.event.RecoveryAction.what',
        { what: message(`alert.recovery.${what}`, {}, String(p.recoveryAction)), n: String(p.recoveryAction) }, code, text);
    }
    case 'Overheating':
      if (!finite(p.celsius)) return message('alert.event.Overheating', {}, code, text);
      return message('alert.event.Overheating.temp', { celsius: withUnit(p.celsius, '°C'), limit: withUnit(p.limit, '°C') }, code, text);
    case 'BudgetExceeded':
    case 'BudgetNearlySpent':
      return message(`alert.event.${a.reason}`, {
        project: a.project ?? '–',
        spent: amount(p.spent, p.unit),
        budget: amount(p.budget, p.unit),
        month: period(p.month),
        percent: ratio(finite(p.percent) ? p.percent / 100 : null),
      }, code, text);
    default:
      return message(`alert.event.${a?.reason}`, {}, code, text);
  }
}

// What to do about an alert: its `actionCode`, with what NVIDIA's catalogue adds for its XID.
export function alertAction(a) {
  const code = a?.actionCode ?? '';
  const text = a?.action ?? '';
  const action = message(`alert.action.${code}`, {}, code, text);
  if (!code || !has(action.key)) return action;
  const n = a.source === 'Restored' ? null : xidOf(a.reason, a.params);
  if (n !== null && has(`xid.note.${n}`)) {
    return message('alert.actionNote', { action, note: message(`xid.note.${n}`, {}, '') }, code, text);
  }
  return action;
}

// Where an alert came from ("XID 79", "ECC", "Temperature", "Budget", ...).
export function alertSource(source) {
  const n = xidOf(source, null);
  if (n !== null) return message('alert.source.xid', { xid: String(n) }, source);
  return message(`alert.source.${source}`, {}, source);
}

export const severity = (s) => message(`alert.severity.${s}`, {}, s);

// A GpuCapacity condition's type (Healthy, DriverHealthy, MemoryErrors, ResetRequired, Overheating).
export const conditionType = (type) => message(`cond.type.${type}`, {}, type);

// A GpuCapacity condition's reason; the condition's English message is not part of it.
export function conditionReason(type, reason) {
  const n = xidOf(reason, null);
  if (n !== null && /^Xid\d+$/.test(String(reason))) return xid(n);
  return message(`cond.reason.${reason}`, {}, reason);
}

// A GpuPool condition's reason.
export const poolReason = (reason) => message(`poolReason.${reason}`, {}, reason);

// A Workload's status.reason.
export const workloadReason = (reason) => message(`workloadReason.${reason}`, {}, reason);

const profileName = (p) => (p === 'full' ? message('profile.full', {}, 'full') : p ?? '–');

// The assessment's suggestion for a pool ({suggestion, suggestionCode, suggestionParams}).
export function suggestion(a) {
  const code = a?.suggestionCode ?? '';
  const text = a?.suggestion ?? '';
  const p = a?.suggestionParams ?? {};
  if (code === 'RightSize') {
    const n = (v, digits) => (numeric(v) === null ? v ?? '–' : decimal(numeric(v), digits));
    return message('suggestion.RightSize', {
      devices: n(p.devices, 0),
      profile: profileName(p.profile),
      peakFbUsedMiB: numeric(p.peakFbUsedMiB) === null ? p.peakFbUsedMiB ?? '–' : withUnit(numeric(p.peakFbUsedMiB), 'MiB', 0),
      peakSmPercent: numeric(p.peakSmPercent) === null ? p.peakSmPercent ?? '–' : ratio(numeric(p.peakSmPercent) / 100),
      suggested: profileName(p.suggested),
      suggestedShare: n(p.suggestedShare, 2),
      share: n(p.share, 2),
    }, code, text);
  }
  return message(`suggestion.${code}`, {}, code, text);
}
