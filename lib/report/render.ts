/**
 * One self-contained HTML page from a report's data: the stylesheet, Chart.js and the page's
 * script are inlined (the page opens offline, no CDN), and the data rides along as JSON.
 *
 * The page's CSS and JS live in lib/report/assets/ and are read at run time beside this module
 * (`npm run build` copies them to dist/lib/report/assets/); Chart.js comes from its own package's
 * UMD build (a runtime dependency), so the page always carries the version package.json pins.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ReportData } from './model.ts';

let assets: { css: string; js: string; chart: string } | null = null;

function loadAssets(): { css: string; js: string; chart: string } {
  if (assets) return assets;
  const here = path.dirname(fileURLToPath(import.meta.url));
  const chartMain = createRequire(import.meta.url).resolve('chart.js'); // .../chart.js/dist/chart.cjs
  assets = {
    css: readFileSync(path.join(here, 'assets', 'page.css'), 'utf8'),
    js: readFileSync(path.join(here, 'assets', 'page.js'), 'utf8'),
    chart: readFileSync(path.join(path.dirname(chartMain), 'chart.umd.min.js'), 'utf8'),
  };
  return assets;
}

/** Text safe inside a <script> element: no `</script`, no `<!--`. */
function scriptSafe(s: string): string {
  return s.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function renderHtml(data: ReportData): string {
  const a = loadAssets();
  // JSON with every '<' escaped cannot end its script element early, whatever item ids hold.
  const json = JSON.stringify(data).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="datagen-checkpoint-log">
<title>${escapeHtml(data.title)}</title>
<style>
${a.css}
</style>
</head>
<body>
<div id="app"><noscript>This report needs JavaScript.</noscript></div>
<script type="application/json" id="dgcl-data">${json}</script>
<script>
${scriptSafe(a.chart)}
</script>
<script>
${scriptSafe(a.js)}
</script>
</body>
</html>
`;
}
