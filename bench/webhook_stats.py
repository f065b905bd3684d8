#!/usr/bin/env python3
"""Reads bench_webhook_receiver's output (`task_id arrival_us` per line) and
prints one BENCH field list for bench/run.

    webhook_stats.py rate FILE
        deliveries=N (distinct task ids) deliveries_per_s=R over first..last arrival
    webhook_stats.py lag FILE TASKS
        dispatch lag per task: arrival - tasks.finished_at (ms; TASKS holds
        `id finished_at created_at` per line, tab-separated, as bench/run
        reads them from either engine);
        also the offered rate of the tasks (created_at span) and how many
        were delivered.
"""
import sys


def arrivals(path):
    first = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2:
                continue
            tid, us = parts[0], int(parts[1])
            if tid not in first or us < first[tid]:
                first[tid] = us
    return first


def pct(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def main():
    mode, path = sys.argv[1], sys.argv[2]
    first = arrivals(path)
    if mode == "rate":
        times = sorted(first.values())
        span = (times[-1] - times[0]) / 1e6 if len(times) > 1 else 0
        rate = (len(times) - 1) / span if span > 0 else 0
        print(f"deliveries={len(times)} span_s={span:.2f} deliveries_per_s={rate:.1f}")
        return
    tasks = {}
    with open(sys.argv[3]) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 3:
                tasks[parts[0]] = (int(parts[1]) if parts[1] else None, int(parts[2]))
    lags, created = [], []
    for tid, us in first.items():
        row = tasks.get(tid)
        if row is None or row[0] is None:
            continue
        lags.append(us / 1000.0 - row[0])
        created.append(row[1])
    span = (max(created) - min(created)) / 1000.0 if len(created) > 1 else 0
    offered = (len(created) - 1) / span if span > 0 else 0
    print(f"deliveries={len(lags)} offered_tasks_per_s={offered:.1f} p50_ms={pct(lags, 50):.2f} "
          f"p90_ms={pct(lags, 90):.2f} p99_ms={pct(lags, 99):.2f} max_ms={pct(lags, 100):.2f}")


main()
