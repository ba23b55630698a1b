// Session: the keys in use (application, type, permissions; never the key
// itself beyond its last four characters), adding and removing keys, and
// where they are kept.
import { html, useState } from '../lib.js';
import { addKey, removeKey, sessionKeys, remembering, setRemember } from '../api.js';
import { Page, Problem, Notice, Field, Check } from '../ui.js';

export function SessionPage() {
  const [key, setKey] = useState('');
  const [err, setErr] = useState(null);
  const [notice, setNotice] = useState('');
  const keys = sessionKeys();
  const add = async (e) => {
    e.preventDefault();
    setErr(null); setNotice('');
    try { const app = await addKey(key); setKey(''); setNotice(`Key of ${app.name} added.`); } catch (e2) { setErr(e2); }
  };
  return html`<${Page} title="Session" intro="The keys this console uses. Each call goes with a key that holds the permission it needs.">
    <table class="list"><caption>Keys in this session (${keys.length})</caption>
      <thead><tr><th scope="col">Application</th><th scope="col">Type</th><th scope="col">Key</th><th scope="col">Permissions</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${keys.map((k, i) => html`<tr><td>${k.app.name}</td><td>${k.app.type}</td><td><code>${k.hint}</code></td>
        <td class="wrap">${k.app.permissions.join(', ')}</td>
        <td><button type="button" onClick=${() => removeKey(i)}>Forget key of ${k.app.name}</button></td></tr>`)}</tbody>
    </table>
    <form class="card" onSubmit=${add} aria-labelledby="add-key">
      <h2 id="add-key">Add a key</h2>
      <${Field} id="add-key-input" label="API key" type="password" value=${key} onInput=${setKey} required autocomplete="off"
        hint="For example a private application's key, to work with tokens beside a management key." />
      <button type="submit">Add key</button>
      <${Problem} error=${err} /><${Notice} text=${notice} />
    </form>
    <section class="card" aria-labelledby="keep">
      <h2 id="keep">Where the keys are kept</h2>
      <${Check} id="remember" label="Keep the keys in this tab's sessionStorage (they survive a reload of this tab, not its closing)"
        checked=${remembering()} onChange=${setRemember} />
      <p class="hint">Otherwise they are kept in this page's memory only. Never in localStorage or a cookie. Sign out forgets them.</p>
    </section>
  <//>`;
}
