/* dgcl report page: reads the embedded JSON and draws it with Chart.js (inlined before this). */
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('dgcl-data').textContent);
  var STATUSES = ['completed', 'filtered', 'failed', 'in_progress'];
  var COLORS = { completed: '#2e9e5b', filtered: '#8a63d2', failed: '#d64545', in_progress: '#d99a1e', created: '#4a78c2' };
  var app = document.getElementById('app');
  app.textContent = '';

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'cls') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    (children || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function fmtTime(ms) { return ms == null ? '-' : new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z'); }
  function fmtNum(n, d) { return n == null ? '-' : Number(n).toLocaleString('en-US', { maximumFractionDigits: d == null ? 0 : d }); }
  function fmtMs(ms) { if (ms == null) return '-'; if (ms < 1000) return fmtNum(ms, 0) + ' ms'; if (ms < 120000) return fmtNum(ms / 1000, 1) + ' s'; return fmtNum(ms / 60000, 1) + ' min'; }
  function badge(s) { return el('span', { cls: 'badge ' + s, text: s.replace('_', ' ') }); }
  function table(id, heads, rows) {
    var thead = el('thead', null, [el('tr', null, heads.map(function (h) { return el('th', { text: h[0], cls: h[1] || '' }); }))]);
    var tbody = el('tbody');
    rows.forEach(function (r) { tbody.appendChild(r); });
    var t = el('table', id ? { id: id } : null, [thead, tbody]);
    return t;
  }
  function tr(cells) { return el('tr', null, cells.map(function (c) { var td = el('td', c[1] ? { cls: c[1] } : null); if (c[0] instanceof Node) td.appendChild(c[0]); else td.textContent = c[0] == null ? '-' : String(c[0]); return td; })); }
  function section(title, id) { var s = el('section', id ? { id: id } : null, [el('h2', { text: title })]); return s; }
  var charts = [];
  function chart(parent, id, config) {
    var canvas = el('canvas', { id: id, 'data-chart': id });
    parent.appendChild(el('div', { cls: 'chart' }, [canvas]));
    config.options = Object.assign({ animation: false, responsive: true, maintainAspectRatio: false }, config.options || {});
    charts.push(new Chart(canvas, config));
  }

  // Header and status cards.
  app.appendChild(el('header', null, [
    el('h1', { text: data.title }),
    el('div', { cls: 'meta', text: data.uri + '  ·  ' + fmtNum(data.events) + ' events, ' + fmtNum(data.itemCount) + ' items  ·  generated ' + fmtTime(data.generatedAtMs) }),
  ].concat(data.snapshot ? [el('div', { cls: 'where', id: 'snapshot', text: 'Snapshot ' + data.snapshot.name + ', taken ' + fmtTime(data.snapshot.createdAtMs) + ' (base version ' + (data.snapshot.baseVersion == null ? 'none' : data.snapshot.baseVersion) + ' + ' + fmtNum(data.snapshot.tailRows) + ' unmerged rows): the log as it was then' })] : [])
    .concat(data.where ? [el('div', { cls: 'where', id: 'where', text: 'Only items where ' + data.where + ' (every figure below counts only them)' })] : [])
    .concat(data.compare ? [el('div', { cls: 'where', id: 'compare-note', text: 'Only the items fork ' + data.compare.fork.experiment + ' was made from: ' + data.compare.source.experiment + ' (this report) compared with ' + data.compare.fork.experiment + ' (' + data.compare.fork.uri + ')' })] : [])));
  var main = el('main');
  app.appendChild(main);
  var cards = el('div', { cls: 'cards', id: 'status-cards' });
  cards.appendChild(el('div', { cls: 'card' }, [el('div', { cls: 'n', text: fmtNum(data.itemCount) }), el('div', { cls: 'l', text: 'items' })]));
  STATUSES.forEach(function (s) {
    cards.appendChild(el('div', { cls: 'card ' + s, 'data-status': s }, [el('div', { cls: 'n', text: fmtNum(data.status[s]) }), el('div', { cls: 'l', text: s.replace('_', ' ') })]));
  });
  main.appendChild(cards);

  // Compare: this cohort beside the fork made from it (only with report({compare})).
  if (data.compare) {
    var cs = [data.compare.source, data.compare.fork];
    var sCmp = section('Compare: ' + cs[0].experiment + ' vs ' + cs[1].experiment, 'compare');
    var head = [['']].concat(cs.map(function (c) { return [c.experiment, 'num']; }));
    var rowsC = [tr([['items']].concat(cs.map(function (c) { return [fmtNum(c.itemCount), 'num']; })))];
    STATUSES.forEach(function (st) { rowsC.push(tr([[st.replace('_', ' ')]].concat(cs.map(function (c) { return [fmtNum(c.status[st]), 'num']; })))); });
    var stepNames = [];
    cs.forEach(function (c) { c.steps.forEach(function (s) { if (stepNames.indexOf(s.name) < 0) stepNames.push(s.name); }); });
    stepNames.forEach(function (n) {
      var per = cs.map(function (c) { return c.steps.filter(function (s) { return s.name === n; })[0] || null; });
      rowsC.push(tr([['step ' + n + ': passed (rate) / failures']].concat(per.map(function (s) { return [s ? fmtNum(s.itemsPassed) + ' (' + (s.passRate == null ? '-' : fmtNum(s.passRate * 100, 1) + '%') + ') / ' + fmtNum(s.failures) : '-', 'num']; }))));
    });
    if (cs[0].field) {
      ['count', 'missing', 'min', 'p50', 'p90', 'max', 'mean'].forEach(function (k) {
        rowsC.push(tr([[cs[0].field.name + ' ' + k]].concat(cs.map(function (c) { return [fmtNum(c.field[k], 4), 'num']; }))));
      });
    }
    sCmp.appendChild(el('div', { cls: 'scroll' }, [table('compare-table', head, rowsC)]));
    // Failures by error type, both sides in one table: a type one side never saw counts 0 there.
    sCmp.appendChild(el('h3', { text: 'Failures by error type' }));
    var types = {};
    cs.forEach(function (c) { c.failures.forEach(function (f) { types[f.errorType] = (types[f.errorType] || 0) + f.events; }); });
    var typeNames = Object.keys(types).sort(function (a, b) { return types[b] - types[a] || (a < b ? -1 : 1); });
    if (typeNames.length === 0) sCmp.appendChild(el('p', { cls: 'muted', id: 'compare-failures-none', text: 'No FAILED events on either side.' }));
    else {
      var FAIL_COLS = [['FAILED events', 'events'], ['items', 'items'], ['failed now', 'failedNow']];
      var fHead = el('thead', null, [
        el('tr', null, [el('th', { text: '' })].concat(cs.map(function (c) { return el('th', { text: c.experiment, colspan: String(FAIL_COLS.length), cls: 'num side' }); }))),
        el('tr', null, [el('th', { text: 'error type' })].concat([].concat.apply([], cs.map(function () { return FAIL_COLS.map(function (k) { return el('th', { text: k[0], cls: 'num' }); }); })))),
      ]);
      var fBody = el('tbody', null, typeNames.map(function (t) {
        var r = tr([[t]].concat([].concat.apply([], cs.map(function (c) {
          var f = c.failures.filter(function (x) { return x.errorType === t; })[0];
          return FAIL_COLS.map(function (k) { return [fmtNum(f ? f[k[1]] : 0), 'num']; });
        }))));
        r.setAttribute('data-error-type', t);
        return r;
      }));
      sCmp.appendChild(el('div', { cls: 'scroll' }, [el('table', { id: 'compare-failures' }, [fHead, fBody])]));
      sCmp.appendChild(el('p', { cls: 'muted', text: 'FAILED events: each a retry or a final failure; items: items that failed with it at least once; failed now: failed items whose latest failure is of this type.' }));
    }
    main.appendChild(sCmp);
  }

  // Progress and status.
  var g1 = el('div', { cls: 'grid2' });
  var sProg = section('Progress over time (cumulative)');
  var sStat = section('Status');
  g1.appendChild(sProg); g1.appendChild(sStat);
  main.appendChild(g1);
  var p = data.progress;
  function series(name, key) { return { label: name, data: p.t.map(function (t, i) { return { x: t, y: p[key][i] }; }), borderColor: COLORS[key], backgroundColor: COLORS[key], pointRadius: p.t.length > 2 ? 0 : 3, borderWidth: 2, stepped: true }; }
  chart(sProg, 'chart-progress', {
    type: 'line',
    data: { datasets: [series('items created', 'created'), series('items completed', 'completed'), series('items filtered', 'filtered'), Object.assign(series('FAILED events', 'failures'), { borderColor: COLORS.failed, backgroundColor: COLORS.failed })] },
    options: { parsing: false, scales: { x: { type: 'linear', ticks: { maxTicksLimit: 6, callback: function (v) { return new Date(v).toISOString().slice(11, 19); } }, title: { display: true, text: 'event time (UTC)' } }, y: { beginAtZero: true, title: { display: true, text: 'items / FAILED events' } } },
      plugins: { tooltip: { callbacks: { title: function (it) { return fmtTime(it[0].parsed.x); } } } } },
  });
  chart(sStat, 'chart-status', {
    type: 'bar',
    data: { labels: STATUSES.map(function (s) { return s.replace('_', ' '); }), datasets: [{ label: 'items', data: STATUSES.map(function (s) { return data.status[s]; }), backgroundColor: STATUSES.map(function (s) { return COLORS[s]; }) }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { beginAtZero: true } } },
  });

  // Steps.
  var sSteps = section('Steps', 'steps');
  var g2 = el('div', { cls: 'grid2' });
  var c1 = el('div'); var c2 = el('div');
  g2.appendChild(c1); g2.appendChild(c2);
  sSteps.appendChild(g2);
  var names = data.steps.map(function (s) { return (s.index != null ? s.index + ':' : '') + s.name; });
  chart(c1, 'chart-steps', {
    type: 'bar',
    data: { labels: names, datasets: [
      { label: 'items passed', data: data.steps.map(function (s) { return s.itemsPassed; }), backgroundColor: COLORS.completed },
      { label: 'failures (retries)', data: data.steps.map(function (s) { return s.failures; }), backgroundColor: COLORS.failed },
      { label: 'retried completions', data: data.steps.map(function (s) { return s.retriedCompletions; }), backgroundColor: COLORS.in_progress },
    ] },
    options: { scales: { y: { beginAtZero: true } } },
  });
  chart(c2, 'chart-durations', {
    type: 'bar',
    data: { labels: names, datasets: [
      // null (no bar) where no duration could be measured, never 0
      { label: 'p50 duration (ms)', data: data.steps.map(function (s) { return s.durationMs.p50; }), backgroundColor: COLORS.created },
      { label: 'p95 duration (ms)', data: data.steps.map(function (s) { return s.durationMs.p95; }), backgroundColor: '#9db4dc' },
    ] },
    options: { scales: { y: { beginAtZero: true, title: { display: true, text: 'step duration (ms), measured steps' } } } },
  });
  sSteps.appendChild(el('p', { cls: 'muted', id: 'step-time', text: data.stepTime }));
  sSteps.appendChild(el('div', { cls: 'scroll', style: 'margin-top:10px' }, [table('steps-table',
    [['step'], ['items passed', 'num'], ['completions', 'num'], ['per minute', 'num'], ['failures', 'num'], ['retried', 'num'], ['durations measured', 'num'], ['duration p50', 'num'], ['p95', 'num'], ['max', 'num']],
    data.steps.map(function (s, i) { return tr([[names[i]], [fmtNum(s.itemsPassed), 'num'], [fmtNum(s.completions), 'num'], [fmtNum(s.perMinute, 1), 'num'], [fmtNum(s.failures), 'num'], [fmtNum(s.retriedCompletions), 'num'], [fmtNum(s.durationMs.count) + ' of ' + fmtNum(s.completions), 'num'], [fmtMs(s.durationMs.p50), 'num'], [fmtMs(s.durationMs.p95), 'num'], [fmtMs(s.durationMs.max), 'num']]); }))]));
  main.appendChild(sSteps);

  // Failures by error type.
  var sFail = section('Failures by error type', 'failures');
  if (data.failures.length === 0) sFail.appendChild(el('p', { cls: 'muted', text: 'No FAILED events.' }));
  else {
    chart(sFail, 'chart-failures', {
      type: 'bar',
      data: { labels: data.failures.map(function (f) { return f.errorType; }), datasets: [
        { label: 'FAILED events', data: data.failures.map(function (f) { return f.events; }), backgroundColor: COLORS.failed },
        { label: 'items failed now', data: data.failures.map(function (f) { return f.failedNow; }), backgroundColor: '#f0a0a0' },
      ] },
      options: { indexAxis: 'y', scales: { x: { beginAtZero: true } } },
    });
    data.failures.forEach(function (f) {
      var l = f.latest;
      sFail.appendChild(el('details', { 'data-error-type': f.errorType }, [
        el('summary', null, [el('b', { text: f.errorType }), ' · ' + fmtNum(f.events) + ' events, ' + fmtNum(f.items) + ' items (' + fmtNum(f.failedNow) + ' failed now) · steps: ' + f.steps.join(', ')]),
        el('div', { cls: 'muted', text: 'latest: item ' + l.itemId + ', step ' + (l.stepName || '?') + ', attempt ' + l.attempt + ', ' + fmtTime(l.atMs) }),
        el('pre', { cls: 'tb', text: l.traceback || '(no traceback)' }),
      ]));
    });
  }
  main.appendChild(sFail);

  // Items table with search, status filter and drill-down.
  var sItems = section('Items', 'items');
  var search = el('input', { id: 'item-search', type: 'search', placeholder: 'search item id, cursor, error…' });
  var filter = el('select', { id: 'status-filter' }, [el('option', { value: '', text: 'any status' })].concat(STATUSES.map(function (s) { return el('option', { value: s, text: s.replace('_', ' ') }); })));
  var count = el('span', { id: 'item-count', cls: 'muted' });
  sItems.appendChild(el('div', { cls: 'controls' }, [search, filter, count]));
  if (data.itemsOmitted > 0) sItems.appendChild(el('p', { cls: 'muted', text: data.itemsOmitted + ' more items not listed here (failed and in-progress items come first); dgcl items lists all.' }));
  var rows = data.items.map(function (it) {
    var idCell = it.name ? el('span', null, [it.id, el('div', { cls: 'muted', text: it.name })]) : it.id;
    var row = tr([[idCell], [badge(it.status)], [it.cursor], [it.attempts, 'num'], [it.events, 'num'], [fmtTime(it.lastMs)], [it.resume]]);
    row.setAttribute('data-item', it.id);
    row.setAttribute('data-status', it.status);
    row._text = (it.id + ' ' + (it.name || '') + ' ' + it.status + ' ' + (it.cursor || '') + ' ' + (it.lastError || '')).toLowerCase();
    row.addEventListener('click', function () { drill(it, row); });
    return row;
  });
  var itemsTable = table('items-table', [['item'], ['status'], ['cursor'], ['attempts', 'num'], ['events', 'num'], ['last event (UTC)'], ['resumes']], rows);
  sItems.appendChild(el('div', { cls: 'scroll' }, [itemsTable]));
  var drillBox = el('div', { id: 'drill', style: 'margin-top:12px' }, [el('p', { cls: 'muted', text: 'Click an item to see its trajectory.' })]);
  sItems.appendChild(drillBox);
  main.appendChild(sItems);
  function applyFilter() {
    var q = search.value.trim().toLowerCase();
    var st = filter.value;
    var shown = 0;
    rows.forEach(function (r) {
      var ok = (!q || r._text.indexOf(q) >= 0) && (!st || r.getAttribute('data-status') === st);
      r.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    count.textContent = shown + ' of ' + rows.length + ' shown';
  }
  search.addEventListener('input', applyFilter);
  filter.addEventListener('change', applyFilter);
  applyFilter();

  var selected = null;
  function drill(it, row) {
    if (selected) selected.classList.remove('selected');
    selected = row; row.classList.add('selected');
    var events = data.trajectories[it.id] || [];
    drillBox.textContent = '';
    drillBox.appendChild(el('h3', null, ['Item ', el('code', { text: it.id }), ' ', badge(it.status), it.name ? ' ' + it.name : null]));
    drillBox.appendChild(el('div', { cls: 'resume', id: 'drill-resume', text: 'Resumes: ' + it.resume + (it.cursor ? '  (cursor ' + it.cursor + ')' : '') }));
    if (it.forkedFrom) {
      var f = it.forkedFrom;
      drillBox.appendChild(el('div', { cls: 'resume', id: 'drill-forked', text: 'Forked from ' + f.pipeline + ' / ' + f.experiment + ', item ' + f.itemId + ', events through seq ' + f.lastKeptSeq }));
    }
    drillBox.appendChild(el('div', { cls: 'scroll' }, [table('trajectory-table', [['seq', 'num'], ['event'], ['step'], ['attempt', 'num'], ['detail'], ['time (UTC)'], ['writer']],
      events.map(function (e) {
        var step = e.step == null ? null : (e.stepIndex != null ? e.stepIndex + ':' : '') + e.step + (e.iteration != null ? '#' + e.iteration : '');
        var detail = e.field != null ? (e.label || e.field) + ' (' + e.valueKind + (e.size != null ? ', ' + fmtNum(e.size) + ' bytes' : '') + ')'
          : e.type === 'FAILED' ? (e.errorType || 'error') : e.type === 'TERMINAL' ? e.terminal : '';
        var r = tr([[e.seq, 'num'], [e.type], [step], [e.attempt, 'num'], [detail], [fmtTime(e.atMs)], [e.writerEpoch]]);
        r.setAttribute('data-seq', e.seq);
        return r;
      }))]));
  }

  // Writers and shards (dgcl stats), each generation's state in the CLI's words (s.label).
  var st = data.stats;
  var sShards = section('Writers and shards', 'shards');
  sShards.appendChild(el('p', null, ['Base: version ' + st.base.version + ', ' + fmtNum(st.base.rows) + ' rows, ' + st.base.fragments + ' fragments, indexes: ' + (st.base.indexes.join(', ') || 'none') + '. ',
    (st.shards.filter(function (s) { return !s.retired; }).length) + ' unmerged shard generations.']));
  if (st.hint) sShards.appendChild(el('p', { cls: 'shards-hint' }, [st.hint]));
  if (st.shards.length) sShards.appendChild(table('shards-table', [['generation'], ['slot', 'num'], ['epoch', 'num'], ['gen', 'num'], ['version', 'num'], ['rows', 'num'], ['state']],
    st.shards.map(function (s) { return tr([[s.name], [s.slot, 'num'], [s.epoch, 'num'], [s.generation, 'num'], [s.version, 'num'], [fmtNum(s.rows), 'num'], [s.label]]); })));
  main.appendChild(sShards);

  window.dgclReport = { charts: charts, data: data };
})();
