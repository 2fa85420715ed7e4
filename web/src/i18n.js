// The message catalogues and the language of the page: from the browser's languages, or the
// user's choice (kept for the session). Every string the page shows is looked up here.
import { en } from './messages/en.js';
import { ko } from './messages/ko.js';
import { observable } from './store.js';

export const CATALOGUES = { en, ko };
export const LANGUAGES = [
  { code: 'en', name: 'English' },
  { code: 'ko', name: '한국어' },
];

// The first of the browser's languages that has a catalogue ("ko-KR" -> "ko"), else English.
export function detect(languages) {
  for (const l of languages ?? []) {
    const base = String(l).toLowerCase().split('-')[0];
    if (CATALOGUES[base]) return base;
  }
  return 'en';
}

// "{n} GPUs" with params {n: "3"}; a missing parameter stays visible as {name}.
export function interpolate(text, params) {
  if (!params) return text;
  return text.replace(/\{(\w+)\}/g, (m, k) => (params[k] === undefined ? m : String(params[k])));
}

export function translate(lang, key, params) {
  const cat = CATALOGUES[lang] ?? en;
  const text = cat[key] ?? en[key];
  if (text === undefined) throw new Error(`no message "${key}"`);
  return interpolate(text, params);
}

// The BCP 47 tag for Intl formatting.
export const locale = (lang) => (lang === 'ko' ? 'ko-KR' : 'en-US');

const LANG_KEY = 'gpuaas.lang';
export const language = observable(
  (typeof sessionStorage !== 'undefined' && sessionStorage.getItem(LANG_KEY)) ||
    detect(typeof navigator !== 'undefined' ? navigator.languages : []),
);
export function setLanguage(l) {
  sessionStorage.setItem(LANG_KEY, l);
  language.set(l);
}
