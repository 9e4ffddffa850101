// What scripts/gen-lua.mjs sends to the server of each script: its code, not its comments.

/**
 * `source` without its comments, indentation, trailing spaces and blank
 * lines, runs of spaces made one; string literals (quoted and long brackets)
 * kept as they are, `--` in them included. Lines stay lines: the server's
 * errors name a script's line (src/redis.ts reads it).
 */
export function stripLua(source) {
  let out = '';
  let i = 0;
  if (source.startsWith('#!')) {
    const end = source.indexOf('\n');
    out = `${source.slice(0, end)}\n`;
    i = end + 1;
  }
  let space = false; // spaces seen since the last token on this line
  const longBracket = (at) => /^\[(=*)\[/.exec(source.slice(at, at + 64));
  const token = (text) => {
    if (space && out !== '' && !out.endsWith('\n')) out += ' ';
    space = false;
    out += text;
  };
  while (i < source.length) {
    const c = source[i];
    if (c === '\n') {
      if (out !== '' && !out.endsWith('\n')) out += '\n';
      space = false;
      i++;
    } else if (c === ' ' || c === '\t' || c === '\r') {
      space = true;
      i++;
    } else if (source.startsWith('--', i)) {
      const open = longBracket(i + 2);
      if (open) {
        const close = source.indexOf(`]${open[1]}]`, i + 2 + open[0].length);
        if (close < 0) throw new Error('unfinished long comment');
        i = close + open[1].length + 2;
        space = true;
      } else {
        const end = source.indexOf('\n', i);
        i = end < 0 ? source.length : end;
      }
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (source[j] !== c) {
        if (j >= source.length || source[j] === '\n') throw new Error(`unfinished string at ${i}`);
        j += source[j] === '\\' ? 2 : 1;
      }
      token(source.slice(i, j + 1));
      i = j + 1;
    } else if (longBracket(i)) {
      const open = longBracket(i);
      const close = source.indexOf(`]${open[1]}]`, i + open[0].length);
      if (close < 0) throw new Error('unfinished long string');
      token(source.slice(i, close + open[1].length + 2));
      i = close + open[1].length + 2;
    } else {
      token(c);
      i++;
    }
  }
  return out.endsWith('\n') ? out.slice(0, -1) : out;
}
