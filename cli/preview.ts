/**
 * Short renderings of what can be long: field values (a 200 MB string is shown as its first
 * characters and its size, and is never copied, escaped or serialised whole) and failures (the
 * error's type, message and the frame it was raised in, whatever language wrote the traceback).
 */
import type { OutputValue } from '../lib/types.ts';

const fmt = (n: number) => n.toLocaleString('en-US');

/** A value in at most about `max` characters (JSON for what fits, else a prefix and a size). */
export function preview(v: OutputValue | undefined, max = 80): string {
  if (v === undefined) return '-';
  if (typeof v === 'string') {
    if (v.length <= max) return JSON.stringify(v);
    // slice() of a long string is a view of it: no copy of the rest.
    return `${JSON.stringify(v.slice(0, max)).slice(0, -1)}…" (${fmt(v.length)} characters)`;
  }
  if (v === null || typeof v !== 'object') return String(v);
  if (!Array.isArray(v)) {
    if ('$blobRef' in v && isObj(v.$blobRef)) return `blob, ${fmt(Number(v.$blobRef.size))} bytes`;
    if ('$int' in v && typeof v.$int === 'string' && Object.keys(v).length === 1) return v.$int;
  }
  const text = boundedJson(v, max);
  if (text.length <= max) return text;
  const size = Array.isArray(v) ? `${fmt(v.length)} items` : `${fmt(Object.keys(v).length)} keys`;
  return `${text.slice(0, max)}… (${size})`;
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * JSON text of `v` up to a little past `max` characters: the walk stops once it has that much,
 * and long strings inside are cut before they are escaped.
 */
function boundedJson(v: unknown, max: number): string {
  let out = '';
  const walk = (x: unknown): void => {
    if (out.length > max) return;
    if (typeof x === 'string') out += JSON.stringify(x.length > max ? x.slice(0, max + 1) : x);
    else if (Array.isArray(x)) {
      out += '[';
      for (let i = 0; i < x.length && out.length <= max; i++) {
        if (i > 0) out += ',';
        walk(x[i]);
      }
      out += ']';
    } else if (isObj(x)) {
      out += '{';
      let first = true;
      for (const k in x) {
        if (out.length > max) break;
        if (!first) out += ',';
        first = false;
        out += `${JSON.stringify(k.length > max ? k.slice(0, max + 1) : k)}:`;
        walk(x[k]);
      }
      out += '}';
    } else out += JSON.stringify(x) ?? 'null';
  };
  walk(v);
  return out;
}

/** A failure in words: `Type: message`, and the frame it was raised in (null when none is recognised). */
export function describeFailure(f: { errorType?: string | null; errorDump?: string | null; traceback?: string | null }): { head: string; frame: string | null } {
  const type = f.errorType ?? 'error';
  const lines = (f.traceback ?? '').split('\n').filter((l) => l.trim() !== '');
  let message: string | null = null;
  let frame: string | null = null;
  let py = -1;
  lines.forEach((l, i) => {
    if (/^\s*File ".*", line \d+/.test(l)) py = i;
  });
  if (py >= 0) {
    // Python: "most recent call last", so the last frame is where it was raised; its source line
    // follows it, and the exception's own line ends the traceback.
    const source = lines[py + 1] !== undefined && /^\s{2,}\S/.test(lines[py + 1]!) && !/^\s*File "/.test(lines[py + 1]!) ? lines[py + 1]!.trim() : null;
    frame = `${lines[py]!.trim()}${source ? `: ${source}` : ''}`;
    message = messageOf(lines.at(-1)!, type);
  } else {
    // JavaScript and the like: the message first, then frames innermost first.
    const js = lines.findIndex((l) => /^\s*at /.test(l));
    if (js >= 0) {
      frame = lines[js]!.trim();
      if (js > 0) message = messageOf(lines.slice(0, js).join(' '), type);
    } else if (lines.length > 0) {
      message = messageOf(lines.at(-1)!, type);
    }
  }
  message ??= f.errorDump ? oneLine(f.errorDump) : null;
  return { head: message ? `${type}: ${message}` : type, frame };
}

/** The message of a `Type: message` line (the line itself when it does not name the type). */
function messageOf(line: string, type: string): string | null {
  const t = line.trim();
  if (t === type) return null;
  const m = /^([\w.$<>]+): ?(.*)$/s.exec(t);
  if (m && (m[1] === type || m[1]!.endsWith(`.${type}`) || /Error|Exception|Timeout/.test(m[1]!))) return oneLine(m[2]!);
  return oneLine(t);
}

function oneLine(s: string, max = 200): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}
