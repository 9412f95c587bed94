/** What a folder holds, for "nothing was written" checks: every path below it, with file sizes. */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

export function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d).sort()) {
      const p = path.join(d, n);
      const s = statSync(p);
      out.push(`${path.relative(dir, p)}${s.isDirectory() ? '/' : ` ${s.size}`}`);
      if (s.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}
