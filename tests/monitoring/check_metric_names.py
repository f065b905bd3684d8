#!/usr/bin/env python3
"""Checks that every metric name used in the Grafana dashboards and the
Prometheus alert rules exists in what our processes and RabbitMQ expose.

    check_metric_names.py --dashboards DIR [--rules FILE ...] EXPOSITION...

EXPOSITION files are scrapes in the Prometheus text format (eq-api, eq-worker,
eq-dispatcher, RabbitMQ's /metrics and /metrics/detailed), written by the
metrics integration test (tests/integration/metrics_test.cc) after it ran some
traffic. A renamed or misspelt metric then fails the build instead of leaving
an empty panel. Exits 1 naming each unknown metric and where it is used.

The PromQL is read with a small tokenizer rather than a full parser: string
literals, label matchers {...}, ranges [...] and the label lists of
by/without/on/ignoring/group_left/group_right are removed first; what remains
that looks like an identifier and is not a function call, keyword or number is
a metric name.
"""
import argparse
import json
import os
import re
import sys

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2"}
# Series Prometheus makes itself for every target, not exposed by anyone.
SYNTHETIC = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
             "scrape_samples_post_metric_relabeling", "scrape_series_added"}

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
GROUPING = re.compile(r'\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)')
IDENT = re.compile(r'(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)(?!\w)')


def metric_names(expr):
    """The metric names an expression reads."""
    e = STRING.sub('""', expr)
    e = re.sub(r'\{[^}]*\}', ' ', e)
    e = re.sub(r'\[[^\]]*\]', ' ', e)
    e = GROUPING.sub(' ', e)
    e = re.sub(r'\$\{?\w+\}?', ' ', e)  # Grafana variables outside ranges
    names = set()
    for m in IDENT.finditer(e):
        word = m.group(1)
        rest = e[m.end():].lstrip()
        if rest.startswith('('):
            continue  # a function or aggregation
        if word.lower() in KEYWORDS:
            continue
        if re.fullmatch(r'\d+[smhdwy]', word):
            continue
        names.add(word)
    return names


def dashboard_exprs(path):
    """(where, expr) for every query of every panel, rows and nesting included."""
    with open(path, encoding='utf-8') as f:
        doc = json.load(f)
    out = []

    def walk(panels):
        for p in panels or []:
            for t in p.get('targets', []) or []:
                if t.get('expr'):
                    out.append(('%s: panel "%s" %s' % (os.path.basename(path), p.get('title'),
                                                      t.get('refId')), t['expr']))
            walk(p.get('panels'))

    walk(doc.get('panels'))
    for v in doc.get('templating', {}).get('list', []):
        q = v.get('query')
        if isinstance(q, dict):
            q = q.get('query')
        if isinstance(q, str) and q:
            for inner in re.findall(r'(?:label_values|query_result)\((.*)\)', q):
                out.append(('%s: variable %s' % (os.path.basename(path), v.get('name')), inner))
    return out


def rule_exprs(path):
    """(where, expr) of every rule; the file is the simple YAML promtool accepts,
    read line by line to stay free of a YAML library."""
    out = []
    name = None
    with open(path, encoding='utf-8') as f:
        for line in f:
            m = re.match(r'\s*-?\s*(?:alert|record):\s*(\S+)', line)
            if m:
                name = m.group(1)
            m = re.match(r'\s*expr:\s*(.+?)\s*$', line)
            if m:
                out.append(('%s: %s' % (os.path.basename(path), name), m.group(1)))
    return out


def exposed_names(path):
    names = set()
    with open(path, encoding='utf-8') as f:
        for line in f:
            if not line.strip() or line.startswith('#'):
                continue
            m = re.match(r'([A-Za-z_:][A-Za-z0-9_:]*)', line)
            if m:
                names.add(m.group(1))
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--dashboards', required=True)
    ap.add_argument('--rules', action='append', default=[])
    ap.add_argument('expositions', nargs='+')
    args = ap.parse_args()

    exposed = set(SYNTHETIC)
    for p in args.expositions:
        exposed |= exposed_names(p)
    uses = []
    for fn in sorted(os.listdir(args.dashboards)):
        if fn.endswith('.json'):
            uses += dashboard_exprs(os.path.join(args.dashboards, fn))
    for r in args.rules:
        uses += rule_exprs(r)
    if not uses:
        print('no queries found: wrong --dashboards directory?', file=sys.stderr)
        return 1

    missing = 0
    used = set()
    for where, expr in uses:
        for name in sorted(metric_names(expr)):
            used.add(name)
            if name not in exposed:
                print('unknown metric %s in %s: %s' % (name, where, expr), file=sys.stderr)
                missing += 1
    print('%d queries, %d distinct metric names, %d unknown' % (len(uses), len(used), missing))
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main())
