// The server's warnings, as kube-apiserver sends them and kubectl prints them: each a
// `Warning: 299 - "text"` header (a write it took but questions: an unknown field, a budget
// already passed, a read cache that lags). fetch joins several headers with ", ". Framework-free.

// The texts of a Warning header's value, in order: what is inside each quoted part, with the
// quotes and backslashes it escapes given back. [] for none.
export function parseWarnings(header) {
  const out = [];
  if (!header) return out;
  let i = 0;
  while (i < header.length) {
    const open = header.indexOf('"', i);
    if (open < 0) break;
    let text = '';
    let j = open + 1;
    for (; j < header.length && header[j] !== '"'; j++) {
      if (header[j] === '\\' && j + 1 < header.length) j++;
      text += header[j];
    }
    out.push(text);
    i = j + 1;
  }
  return out;
}
