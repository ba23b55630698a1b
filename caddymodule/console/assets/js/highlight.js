// A small JavaScript highlighter for the reactor and transform editor: a
// single left-to-right scan into tokens (comment, string, template,
// number, keyword, regexp-free punctuation, word). It only colours text;
// the vault's own parser is the judge of the code (errors come back from
// the API with their line).

const KEYWORDS = new Set(('async await break case catch class const continue debugger default delete do else export ' +
  'extends false finally for function if import in instanceof let new null of return static super switch this throw ' +
  'true try typeof undefined var void while with yield module require').split(' '));

const RULES = [
  ['comment', /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y],
  ['string', /"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?/y],
  ['string', /`(?:[^`\\]|\\[\s\S])*`?/y],
  ['number', /(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?n?|\.\d[\d_]*(?:[eE][+-]?\d+)?)/y],
  ['word', /[A-Za-z_$][\w$]*/y],
  ['space', /\s+/y],
  ['punct', /[^\sA-Za-z_$\d"'`/]+|\//y],
];

/** Splits code into [kind, text] tokens whose texts join back into code. */
export function tokenize(code) {
  const out = [];
  let i = 0;
  while (i < code.length) {
    let matched = false;
    for (const [kind, re] of RULES) {
      re.lastIndex = i;
      const m = re.exec(code);
      if (m && m[0].length > 0) {
        let k = kind;
        if (k === 'word' && KEYWORDS.has(m[0])) k = 'keyword';
        out.push([k, m[0]]);
        i += m[0].length;
        matched = true;
        break;
      }
    }
    if (!matched) { out.push(['punct', code[i]]); i++; }
  }
  return out;
}
