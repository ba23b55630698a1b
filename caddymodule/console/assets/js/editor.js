// A code editor: a plain <textarea> (so the browser's editing, undo,
// selection and accessibility all work) laid over a highlighted copy of
// its text, with line numbers. Tab is left to move the focus, as a
// keyboard user expects; the error line, when there is one, is marked in
// the gutter and named in the message below.
import { html, useRef } from './lib.js';
import { tokenize } from './highlight.js';

export function CodeEditor({ id, label, value, onInput, errorLine, describedBy, rows = 14 }) {
  const pre = useRef(null);
  const gutter = useRef(null);
  const lines = value.split('\n');
  const sync = (e) => {
    if (pre.current) { pre.current.scrollTop = e.target.scrollTop; pre.current.scrollLeft = e.target.scrollLeft; }
    if (gutter.current) gutter.current.scrollTop = e.target.scrollTop;
  };
  return html`
    <div class="editor-field">
      <label for=${id}>${label}</label>
      <div class=${'editor rows-' + rows}>
        <div class="gutter" aria-hidden="true" ref=${gutter}>
          ${lines.map((_, i) => html`<div class=${i + 1 === errorLine ? 'line-no error-line' : 'line-no'}>${i + 1}</div>`)}
        </div>
        <div class="code-area">
          <pre class="highlight" aria-hidden="true" ref=${pre}><code>${tokenize(value + '\n').map(([k, t]) =>
            k === 'space' || k === 'word' || k === 'punct' ? t : html`<span class=${'tok-' + k}>${t}</span>`)}</code></pre>
          <textarea id=${id} class="code-input" spellcheck="false" autocapitalize="off" autocomplete="off"
            wrap="off" value=${value} onInput=${(e) => onInput(e.target.value)} onScroll=${sync}
            aria-invalid=${errorLine ? 'true' : 'false'} aria-describedby=${describedBy}></textarea>
        </div>
      </div>
    </div>`;
}

/** The line and column named in a vault validation message, or null. */
export function errorPosition(message) {
  const m = /\(line (\d+), column (\d+)\)/.exec(message || '') || /line (\d+)(?::(\d+))?/.exec(message || '');
  return m ? { line: Number(m[1]), column: Number(m[2] || 1) } : null;
}
