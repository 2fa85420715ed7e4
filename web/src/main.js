// The GPU Dashboard: the app shell (sign-in, navigation, live state, language) and its pages.
import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { serverWarnings, session, signIn, signOut, restore } from './api.js';
import { language, LANGUAGES, setLanguage } from './i18n.js';
import { live, setPaused, startLive, stopLive } from './live.js';
import { route, match } from './router.js';
import { useObservable } from './store.js';
import { html, Link, useNow, useT } from './ui/parts.js';
import { ago } from './logic/format.js';
import { Overview } from './pages/overview.js';
import { Fleet } from './pages/fleet.js';
import { GpuPage } from './pages/gpu.js';
import { Pools } from './pages/pools.js';
import { Monitoring } from './pages/monitoring.js';
import { Billing } from './pages/billing.js';

const NAV = [
  ['/', 'nav.overview', 'overview'],
  ['/fleet', 'nav.fleet', 'fleet'],
  ['/pools', 'nav.pools', 'pools'],
  ['/monitoring', 'nav.monitoring', 'monitoring'],
  ['/billing', 'nav.billing', 'billing'],
];

function SignIn() {
  const { t } = useT();
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await signIn(token.trim());
    } catch (err) {
      setError(err.status === 401 ? t('signin.bad') : err.reason === 'AgentToken' ? t('signin.agent') : t('error.load', { detail: err.message }));
    } finally {
      setBusy(false);
    }
  };
  return html`<main id="main" class="signin">
    <h1>${t('app.title')}</h1>
    <form onSubmit=${submit} class="signin-form">
      <label for="token">${t('signin.token')}</label>
      <input id="token" type="password" autocomplete="off" value=${token} onInput=${(e) => setToken(e.target.value)}
        aria-describedby="token-help" aria-invalid=${error ? 'true' : 'false'} required />
      <p id="token-help" class="muted">${t('signin.help')}</p>
      ${error ? html`<p class="error" role="alert">${error}</p>` : null}
      <button type="submit" disabled=${busy}>${t('signin.submit')}</button>
    </form>
    <${LanguageSwitch} />
  </main>`;
}

function LanguageSwitch() {
  const { t, lang } = useT();
  return html`<label class="lang">${t('lang.label')}
    <select value=${lang} onChange=${(e) => setLanguage(e.target.value)}>
      ${LANGUAGES.map((l) => html`<option value=${l.code} lang=${l.code}>${l.name}</option>`)}
    </select></label>`;
}

function LiveStatus() {
  const { t, loc } = useT();
  const s = useObservable(live);
  const now = useNow(1000);
  return html`<div class="live" role="group" aria-label=${t('live.group')}>
    <span class="live-ago" data-testid="updated" aria-live="off">
      ${s.updated ? t('live.updated', { ago: ago(s.updated, now, loc) }) : t('loading')}
    </span>
    <button type="button" class="secondary" aria-pressed=${s.paused ? 'true' : 'false'} onClick=${() => setPaused(!s.paused)}>
      ${s.paused ? t('live.resume') : t('live.pause')}
    </button>
  </div>`;
}

function StaleBanner() {
  const { t } = useT();
  const s = useObservable(live);
  if (s.connected && !s.paused) return null;
  if (s.paused) return html`<div class="banner info" role="status">${t('live.paused')}</div>`;
  return html`<div class="banner warn" role="alert" data-testid="stale">${t('live.stale')}</div>`;
}

// What the server warned of on the user's writes, as kubectl prints it, until dismissed.
function ServerWarnings() {
  const { t } = useT();
  const said = useObservable(serverWarnings);
  if (said.length === 0) return null;
  return html`<div class="banner warn" role="status" data-testid="server-warnings">
    <ul>${said.map((w) => html`<li>${t('warning.server', { text: w })}</li>`)}</ul>
    <button type="button" class="secondary" onClick=${() => serverWarnings.set([])}>${t('warning.dismiss')}</button>
  </div>`;
}

function Page({ page, params, wall }) {
  switch (page) {
    case 'overview': return html`<${Overview} wall=${wall} />`;
    case 'fleet': return html`<${Fleet} />`;
    case 'gpu': return html`<${GpuPage} uuid=${params.uuid} />`;
    case 'pools': return html`<${Pools} />`;
    case 'monitoring': return html`<${Monitoring} />`;
    case 'billing': return html`<${Billing} />`;
    default: return html`<${NotFound} />`;
  }
}

function NotFound() {
  const { t } = useT();
  return html`<h1>${t('notfound.title')}</h1><p><${Link} href="/">${t('nav.overview')}</${Link}></p>`;
}

function Shell() {
  const { t, lang } = useT();
  const { who } = useObservable(session);
  const r = useObservable(route);
  const { page, params } = match(r.path);
  const wall = r.query.get('wall') === '1';
  const heading = useRef(null);
  useEffect(() => {
    document.title = `${t('page.' + page)} · ${t('app.title')}`;
  }, [page, lang]);
  useEffect(() => {
    document.documentElement.classList.toggle('wall-mode', wall);
  }, [wall]);
  useEffect(() => {
    startLive();
    return stopLive;
  }, [who.user]);
  return html`<div class=${wall ? 'app wall' : 'app'}>
    <a class="skip" href="#main">${t('skip')}</a>
    <header class="top">
      <span class="brand">${t('app.title')}</span>
      ${wall ? null : html`<nav aria-label=${t('nav.label')}><ul>
        ${NAV.map(([href, key, p]) => html`<li><${Link} href=${href} aria-current=${p === page || (p === 'fleet' && page === 'gpu') ? 'page' : undefined}>${t(key)}</${Link}></li>`)}
      </ul></nav>`}
      <div class="top-right">
        <${LiveStatus} />
        ${wall ? html`<${Link} href="/">${t('wall.exit')}</${Link}>` : html`<${Link} href="/?wall=1">${t('wall.enter')}</${Link}>`}
        <${LanguageSwitch} />
        <span class="who">${who.role === 'operator' ? t('who.operator', { user: who.user }) : t('who.member', { user: who.user, project: who.project })}</span>
        <button type="button" class="secondary" onClick=${signOut}>${t('signout')}</button>
      </div>
    </header>
    <${StaleBanner} />
    <${ServerWarnings} />
    <main id="main" ref=${heading} tabindex="-1">
      <${Page} page=${page} params=${params} wall=${wall} />
    </main>
  </div>`;
}

function App() {
  const { who, token } = useObservable(session);
  const lang = useObservable(language);
  const [ready, setReady] = useState(!token);
  useEffect(() => {
    document.documentElement.lang = lang;
  }, [lang]);
  useEffect(() => {
    if (token && !who) restore().finally(() => setReady(true));
  }, []);
  if (!ready) return null;
  return who ? html`<${Shell} />` : html`<${SignIn} />`;
}

render(html`<${App} />`, document.getElementById('app'));
