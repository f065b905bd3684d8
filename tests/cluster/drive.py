#!/usr/bin/env python3
"""The cluster fault test's traffic (tests/cluster/run): a stream of async
calls and back-to-back sync calls against eq-api while one broker node, the
one leading the quorum job queue, is stopped.

Checks the contract of issue 13: no accepted task is lost (every 200 of
POST /api/v1/reply/async ends `succeeded`), and sync calls answer 200 again
within 5 s of the stop. Prints one JSON line of measurements.

    drive.py BASE_URL API_KEY STOP_COMMAND
"""
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

BASE, KEY, STOP = sys.argv[1], sys.argv[2], sys.argv[3]
BEFORE_S, AFTER_S = 5.0, 12.0
ASYNC_RATE = 40  # calls per second
SYNC_RECOVERY_LIMIT_S = 5.0


def call(method, path, body=None, timeout=35):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={
        "Authorization": "Bearer " + KEY, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception:  # connection refused or reset: counts as not accepted
        return 0, None


stop_at = None
done = threading.Event()
accepted, refused = [], {}
sync_log = []  # (sent_at, answered_at, status)
lock = threading.Lock()


def async_stream():
    i = 0
    start = time.monotonic()
    while not done.is_set():
        status, body = call("POST", "/api/v1/reply/async",
                            {"mode": "fast", "message": f"第{i}条：今天有点累", "reply_count": 1})
        with lock:
            if status == 200:
                accepted.append(body["data"]["task_id"])
            else:
                refused[status] = refused.get(status, 0) + 1
        i += 1
        time.sleep(max(0.0, start + i / ASYNC_RATE - time.monotonic()))


def sync_stream():
    while not done.is_set():
        sent = time.monotonic()
        status, _ = call("POST", "/api/v1/reply", {"mode": "fast", "message": "在吗？想你了"})
        with lock:
            sync_log.append((sent, time.monotonic(), status))
        if status != 200:
            time.sleep(0.05)


threads = [threading.Thread(target=async_stream), threading.Thread(target=sync_stream)]
for t in threads:
    t.start()
time.sleep(BEFORE_S)
stop_at = time.monotonic()
stopped = subprocess.run(["bash", "-c", STOP], capture_output=True, text=True)
stop_took = time.monotonic() - stop_at
print("drive: " + stopped.stdout.strip(), file=sys.stderr)
if stopped.returncode != 0:
    print("drive: the stop command failed: " + stopped.stderr, file=sys.stderr)
    done.set()
    sys.exit(1)
time.sleep(AFTER_S)
done.set()
for t in threads:
    t.join()

# Sync recovery: the longest time without a 200 from the moment the stop
# began (a graceful node stop takes seconds; the processes connected to that
# node lose their connection during it) to the end of the run.
oks = sorted(a for (s, a, st) in sync_log if st == 200 and a >= stop_at)
marks = [stop_at] + oks
recovery_s = max((b - a for a, b in zip(marks, marks[1:])), default=None)
if not oks:
    recovery_s = None
sync_errors = sum(1 for (s, a, st) in sync_log if st != 200 and a >= stop_at)

# Every accepted task must succeed.
deadline = time.monotonic() + 90
pending = set(accepted)
final = {}
while pending and time.monotonic() < deadline:
    for tid in list(pending):
        status, body = call("GET", "/api/v1/task/" + tid, timeout=10)
        if status == 200 and body["data"]["status"] in ("succeeded", "failed"):
            final[tid] = body["data"]["status"]
            pending.discard(tid)
    if pending:
        time.sleep(0.5)

result = {
    "accepted": len(accepted),
    "refused": refused,
    "succeeded": sum(1 for v in final.values() if v == "succeeded"),
    "failed": sum(1 for v in final.values() if v == "failed"),
    "unfinished": len(pending),
    "sync_calls": len(sync_log),
    "sync_non200_after_stop": sync_errors,
    "sync_longest_gap_s": None if recovery_s is None else round(recovery_s, 3),
    "stop_took_s": round(stop_took, 2),
    "stopped": stopped.stdout.strip(),
}
print(json.dumps(result))
ok = (result["unfinished"] == 0 and result["failed"] == 0 and result["accepted"] > 0
      and recovery_s is not None and recovery_s <= SYNC_RECOVERY_LIMIT_S)
if not ok:
    print("drive: FAILED: " + json.dumps(result), file=sys.stderr)
sys.exit(0 if ok else 1)
