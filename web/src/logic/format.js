// Numbers, money, dates and durations for the locale, with Intl. Framework-free.

const cache = new Map();
function nf(lang, opts) {
  const k = lang + JSON.stringify(opts);
  if (!cache.has(k)) cache.set(k, new Intl.NumberFormat(lang, opts));
  return cache.get(k);
}

export function number(v, lang, digits = 0) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  return nf(lang, { maximumFractionDigits: digits, minimumFractionDigits: 0 }).format(v);
}

export function percent(ratio, lang, digits = 0) {
  if (ratio === null || ratio === undefined || Number.isNaN(ratio)) return '–';
  return nf(lang, { style: 'percent', maximumFractionDigits: digits }).format(ratio);
}

// Amounts are kept in millionths of the currency unit (the API's *Micros fields).
export function money(micros, currency, lang) {
  if (micros === null || micros === undefined) return '–';
  return nf(lang, { style: 'currency', currency: currency || 'USD' }).format(micros / 1e6);
}

export function watts(w, lang) {
  if (w === null || w === undefined) return '–';
  if (Math.abs(w) >= 10000) return `${number(w / 1000, lang, 1)} kW`;
  return `${number(w, lang, 0)} W`;
}

export function mib(v, lang) {
  if (v === null || v === undefined) return '–';
  return v >= 1024 ? `${number(v / 1024, lang, 1)} GiB` : `${number(v, lang)} MiB`;
}

// Korean operators read the clock from 00:00 to 23:59 (the locale's default is 오전 12:00 for
// midnight); other languages keep their own.
function hours(lang) {
  return String(lang).toLowerCase().startsWith('ko') ? { hourCycle: 'h23' } : {};
}

const dtCache = new Map();
function df(lang, opts) {
  const k = lang + JSON.stringify(opts);
  if (!dtCache.has(k)) dtCache.set(k, new Intl.DateTimeFormat(lang, { ...opts, ...hours(lang) }));
  return dtCache.get(k);
}

export function dateTime(iso, lang) {
  if (!iso) return '–';
  const d = typeof iso === 'number' ? new Date(iso * 1000) : new Date(iso);
  return df(lang, { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

// The time of day alone, as a chart's time axis shows it: "00:00" (ko-KR), "12:00 AM" (en-US).
export function clock(date, lang) {
  return df(lang, { hour: '2-digit', minute: '2-digit' }).format(date);
}

export function month(period, lang) {
  const [y, m] = period.split('-').map(Number);
  return new Intl.DateTimeFormat(lang, { year: 'numeric', month: 'long', timeZone: 'UTC' }).format(Date.UTC(y, m - 1, 1));
}

// "3 s ago" / "3초 전": how long since `then` (ms) at `now` (ms).
export function ago(then, now, lang) {
  const s = Math.max(0, Math.round((now - then) / 1000));
  const rtf = new Intl.RelativeTimeFormat(lang, { numeric: 'always', style: 'narrow' });
  if (s < 90) return rtf.format(-s, 'second');
  if (s < 5400) return rtf.format(-Math.round(s / 60), 'minute');
  return rtf.format(-Math.round(s / 3600), 'hour');
}

// The calendar months ending with the one holding `now` (UTC), newest first: "YYYY-MM".
export function recentPeriods(now, n) {
  const d = new Date(now);
  const out = [];
  let y = d.getUTCFullYear(), m = d.getUTCMonth() + 1;
  for (let i = 0; i < n; i++) {
    out.push(`${y}-${String(m).padStart(2, '0')}`);
    m -= 1;
    if (m === 0) { m = 12; y -= 1; }
  }
  return out;
}
