// The console's shell: sign-in, navigation (hash routes, so the server
// serves one page), and the pages.
import { html, render, useState, useEffect } from './lib.js';
import { addKey, isSignedIn, signOut, subscribe, restore, setRemember, sessionKeys, can, loadHeaderNames } from './api.js';
import { Field, Check, Problem } from './ui.js';
import { TenantPage } from './pages/tenant.js';
import { ApplicationsPage } from './pages/applications.js';
import { TokensPage } from './pages/tokens.js';
import { ProxiesPage } from './pages/proxies.js';
import { ReactorsPage } from './pages/reactors.js';
import { LogsPage } from './pages/logs.js';
import { UsagePage } from './pages/usage.js';
import { SessionPage } from './pages/session.js';

const ROUTES = [
  { path: 'tenant', label: 'Tenant', page: TenantPage, needs: 'tenant:read' },
  { path: 'applications', label: 'Applications', page: ApplicationsPage, needs: 'application:read' },
  { path: 'tokens', label: 'Tokens', page: TokensPage, needs: 'token:read' },
  { path: 'proxies', label: 'Proxies', page: ProxiesPage, needs: 'proxy:read' },
  { path: 'reactors', label: 'Reactors', page: ReactorsPage, needs: 'reactor:read' },
  { path: 'logs', label: 'Audit log', page: LogsPage, needs: 'log:read' },
  { path: 'usage', label: 'Usage', page: UsagePage, needs: 'report:read' },
  { path: 'session', label: 'Session', page: SessionPage, needs: null },
];

function currentPath() {
  return (window.location.hash || '').replace(/^#\/?/, '') || '';
}

function SignIn() {
  const [key, setKey] = useState('');
  const [keep, setKeep] = useState(false);
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setErr(null); setBusy(true);
    try {
      await addKey(key);
      setKey('');
      setRemember(keep);
      const first = ROUTES.find((r) => r.needs && can(r.needs));
      window.location.hash = '#/' + (first ? first.path : 'session');
    } catch (e2) { setErr(e2); } finally { setBusy(false); }
  };
  return html`<main id="main" class="signin">
    <h1>Tokenvault console</h1>
    <form onSubmit=${submit} class="card" aria-labelledby="signin-title">
      <h2 id="signin-title">Sign in with an API key</h2>
      <p>Paste a management key (tenants, applications, proxies, reactors, logs) or a private key (tokens).
        The console calls this vault's API with it and can do only what the key may.</p>
      <${Field} id="signin-key" label="API key" type="password" value=${key} onInput=${setKey} required autocomplete="off" />
      <${Check} id="signin-keep" label="Keep the key for this tab (sessionStorage) instead of memory only" checked=${keep} onChange=${setKeep} />
      <button type="submit" disabled=${busy}>Sign in</button>
      <${Problem} error=${err} />
    </form>
  </main>`;
}

function Shell() {
  const [path, setPath] = useState(currentPath());
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const on = () => { setPath(currentPath()); setOpen(false); };
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  const routes = ROUTES.filter((r) => !r.needs || can(r.needs));
  const route = routes.find((r) => r.path === path) || routes[0];
  const Current = route.page;
  const keys = sessionKeys();
  return html`
    <a class="skip" href="#main">Skip to content</a>
    <header class="top">
      <span class="brand">Tokenvault</span>
      <button type="button" class="menu" aria-expanded=${open ? 'true' : 'false'} aria-controls="nav" onClick=${() => setOpen(!open)}>Menu</button>
      <span class="who">${keys.map((k) => k.app.name + ' (' + k.app.type + ')').join(', ')}</span>
      <button type="button" onClick=${() => { signOut(); window.location.hash = ''; }}>Sign out</button>
    </header>
    <div class="layout">
      <nav id="nav" class=${open ? 'open' : ''} aria-label="Console">
        <ul>${routes.map((r) => html`<li><a href=${'#/' + r.path} aria-current=${r === route ? 'page' : undefined}>${r.label}</a></li>`)}</ul>
      </nav>
      <main id="main" tabindex="-1"><${Current} key=${route.path} /></main>
    </div>`;
}

function App() {
  const [, setTick] = useState(0);
  const [ready, setReady] = useState(false);
  useEffect(() => subscribe(() => setTick((t) => t + 1)), []);
  useEffect(() => { Promise.all([loadHeaderNames(), restore()]).finally(() => setReady(true)); }, []);
  if (!ready) return html`<p role="status">Loading…</p>`;
  return isSignedIn() ? html`<${Shell} />` : html`<${SignIn} />`;
}

render(html`<${App} />`, document.getElementById('app'));
