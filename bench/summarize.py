#!/usr/bin/env python3
"""bench/run's summary: medians per build and scenario of every BENCH field,
then the ratios and the targets of issues 10 and 11 as PASS/FAIL lines.

    summarize.py RESULTS_FILE "name1 name2 ..."   (the EQ builds, in order)

BENCH lines look like `BENCH build=B round=R scenario=S key=value ...`;
the peer is build=peer, the broker's ceiling build=broker, nginx build=nginx.
"""
import sys
from collections import defaultdict


def median(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2] if xs else None


def main():
    results, builds = sys.argv[1], sys.argv[2].split()
    runs = defaultdict(lambda: defaultdict(list))  # (build, scenario) -> field -> values
    order = []
    with open(results) as f:
        for line in f:
            if not line.startswith("BENCH "):
                continue
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            key = (fields.pop("build"), fields.pop("scenario"))
            fields.pop("round", None)
            if key not in runs:
                order.append(key)
            for k, v in fields.items():
                try:
                    runs[key][k].append(float(v))
                except ValueError:
                    pass
    med = {}
    for key in order:
        med[key] = {k: median(v) for k, v in runs[key].items() if v}
        shown = " ".join(f"{k}={v:g}" for k, v in med[key].items() if k not in ("requests", "duration_s"))
        count = max((len(v) for v in runs[key].values()), default=0)
        print(f"MEDIAN build={key[0]} scenario={key[1]} runs={count} {shown}")

    def get(build, scenario, field):
        return med.get((build, scenario), {}).get(field)

    def ratio(name, num, den):
        if num is None or den is None or den == 0:
            return None
        r = num / den
        print(f"RATIO {name} = {r:.3f} ({num:g} / {den:g})")
        return r

    def target(build, name, value, op, limit, unit=""):
        if value is None:
            print(f"TARGET build={build} {name}: not measured (target {op} {limit:g}{unit}) SKIP")
            return
        ok = value >= limit if op == ">=" else value <= limit
        shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
        print(f"TARGET build={build} {name}: {shown}{unit} (target {op} {limit:g}{unit}) {'PASS' if ok else 'FAIL'}")

    for b in builds:
        print(f"# {b}")
        r = ratio(f"{b}/peer reply_fast req/s", get(b, "reply_fast", "rps"), get("peer", "reply_fast", "rps"))
        target(b, "reply_fast req/s EQ/peer", r, ">=", 10, "x")
        r = ratio(f"{b}/peer reply_fast p99", get(b, "reply_fast", "p99_ms"), get("peer", "reply_fast", "p99_ms"))
        target(b, "reply_fast p99 EQ/peer", r, "<=", 0.2, "x")
        r = ratio(f"{b}/peer analyze req/s", get(b, "analyze", "rps"), get("peer", "analyze", "rps"))
        target(b, "analyze req/s EQ/peer", r, ">=", 10, "x")
        r = ratio(f"{b}/peer analyze p99", get(b, "analyze", "p99_ms"), get("peer", "analyze", "p99_ms"))
        target(b, "analyze p99 EQ/peer", r, "<=", 0.2, "x")
        r = ratio(f"{b}/ceiling reply_fast req/s", get(b, "reply_fast", "rps"), get("broker", "ceiling", "rps"))
        target(b, "reply_fast req/s EQ/ceiling", r, ">=", 0.4, "x")
        r = ratio(f"{b}/ceiling analyze req/s", get(b, "analyze", "rps"), get("broker", "ceiling", "rps"))
        target(b, "analyze req/s EQ/ceiling", r, ">=", 0.4, "x")
        target(b, "async admission tasks/s", get(b, "async_admission", "accepted_rps"), ">=", 2000)
        target(b, "webhook deliveries/s", get(b, "webhooks", "deliveries_per_s"), ">=", 3000)
        lag = get(b, "dispatch_lag", "p99_ms")
        offered = get(b, "dispatch_lag", "offered_tasks_per_s")
        if offered is not None:
            print(f"# dispatch lag measured at {offered:.0f} tasks/s offered")
        target(b, "dispatch lag p99 at 1,000 tasks/s", lag, "<=", 50, " ms")
        r = ratio(f"{b}/nginx quota req/s", get(b, "quota", "rps"), get("nginx", "quota", "rps"))
        target(b, "quota req/s EQ/nginx", r, ">=", 0.4, "x")
        target(b, "eq-api RSS with idle keep-alive connections", get(b, "idle_rss", "rss_mib"), "<=", 64, " MiB")

    # Issue 23: a build on PostgreSQL (NAME-pg) against the same build on
    # SQLite (NAME), and two eq-api processes (NAME-pg-x2) against one.
    for b in builds:
        if b.endswith("-pg") and b[:-3] in builds:
            lite = b[:-3]
            print(f"# {b} against {lite}")
            r = ratio(f"{b}/{lite} reply_fast req/s", get(b, "reply_fast", "rps"), get(lite, "reply_fast", "rps"))
            target(b, "reply_fast req/s PostgreSQL/SQLite", r, ">=", 0.6, "x")
            r = ratio(f"{b}/{lite} quota req/s", get(b, "quota", "rps"), get(lite, "quota", "rps"))
            target(b, "quota req/s PostgreSQL/SQLite", r, ">=", 0.5, "x")
        if b.endswith("-pg-x2") and b[:-3] in builds:
            one = b[:-3]
            print(f"# {b} against {one}")
            for scenario, field in (("quota", "rps"), ("reply_fast", "rps"), ("async_admission", "accepted_rps")):
                r = ratio(f"{b}/{one} {scenario} {field}", get(b, scenario, field), get(one, scenario, field))
                target(b, f"{scenario} two eq-api processes/one", r, ">=", 1.0, "x")


main()
