#!/usr/bin/env python3
# results_md.py - the tables of docs/results.md from a pcbench --json file:
#
#   python3 scripts/results_md.py docs/results-full.json [SUITE...] > tables.md
#
# One table per workload, each path a row: its figures, the ratio to
# kernel-buffered's (or, in the rows that compare with something else,
# memcpy or pagecache itself, to that row), the target and PASS/FAIL, as
# pcbench printed them.  Only
# formatting: every number comes from the JSON.
import json, sys
d = json.load(open(sys.argv[1]))
res = d['results']
def fmt(v, kind):
    if v is None: return '-'
    if kind == 'bytes':
        if v >= 1<<20: return '%.1f MiB' % (v/(1<<20))
        if v >= 1024: return '%.1f KiB' % (v/1024)
        return '%d B' % v
    if kind == 'rpw': return '%.3f' % v
    if kind == 'share': return '%.2f' % v
    if v >= 1e6: return '{:,.0f}'.format(v)
    if v >= 100: return '{:,.1f}'.format(v)
    return '%.2f' % v
cols = [('mib_s','MiB/s','num'),('ops_s','ops/s','num'),('p50_us','p50 us','num'),('p99_us','p99 us','num'),
        ('p999_us','p99.9 us','num'),('peak_dirty_bytes','peak dirty','bytes'),('reads_per_write','reads/write','rpw'),
        ('cached_after_bytes','cached after','bytes'),('share','share','share')]
order = []
for r in res:
    k = (r['suite'], r['workload'])
    if k not in order: order.append(k)
suites = []
for s, w in order:
    if s not in suites: suites.append(s)
only = sys.argv[2:] if len(sys.argv) > 2 else None
for s in suites:
    if only and s not in only: continue
    print('### %s\n' % s)
    for ss, w in order:
        if ss != s: continue
        rows = [r for r in res if r['suite'] == s and r['workload'] == w]
        legacy = all(r['mib_s'] is None and r['ops_s'] is None or r['value'] is not None and r['unit'] not in ('MiB/s',) for r in rows) and any(r['unit'] and r['unit'] not in ('MiB/s','KB/s') for r in rows)
        use = [c for c in cols if any(r[c[0]] is not None for r in rows)]
        if legacy or not use:
            use = []
        hdr = ['path'] + [c[1] for c in use]
        if not use: hdr.append('value')
        hdr += ['ratio', 'target', 'result']
        print('**%s**\n' % w)
        print('| ' + ' | '.join(hdr) + ' |')
        print('| ' + ' | '.join(['---'] + ['---:'] * (len(hdr) - 3) + ['---', '---']) + ' |')
        def head(r):
            for k in ('mib_s','ops_s','value'):
                if r[k] is not None: return r[k]
        for r in rows:
            if r['error']:
                print('| %s | error: %s |' % (r['path'], r['error'][:80]) + ' |' * (len(hdr) - 2)); continue
            cells = [r['path']] + [fmt(r[c[0]], c[2]) for c in use]
            if not use: cells.append('%s %s' % (fmt(r['value'],'num'), r['unit'] or ''))
            ratio = '-'
            kbuf = [x for x in rows if x['path'] == 'kernel-buffered' and not x['error']]
            base = []
            if kbuf and r['path'] != 'kernel-buffered':
                base = kbuf
            elif not kbuf and len(rows) == 2 and r is rows[1]:
                # a pair whose first row is the base (memcpy, 1 thread,
                # kernel 2 threads, two handles, the first writer)
                base = [rows[0]] if not rows[0]['error'] else []
            elif r['path'].startswith('pagecache-') and (r['pass'] is not None or not any(x['path'].startswith('pagecache-buffered-') for x in rows)):
                base = [x for x in rows if not x['path'].startswith('pagecache-') and not x['error']] or \
                       [x for x in rows[:rows.index(r)] if x['path'].startswith('pagecache-buffered') and not x['error']]
            if base and head(base[0]) and head(r) is not None:
                ratio = '%.2fx %s' % (head(r)/head(base[0]), base[0]['path'])
            cells += [ratio, (r['target'] or '').replace('|','/'), '' if r['pass'] is None else ('PASS' if r['pass'] else 'FAIL')]
            print('| ' + ' | '.join(cells) + ' |')
        print()
