#!/usr/bin/env python3
"""The skill script answers bad usage with its JSON error (issue 28).

SKILL.md promises one JSON object on stdout and exit status 2 for bad
usage. Each bad command line below must print exactly that, an object with
"ok": false, "status": null, the problem in "msg" and the command's usage,
and nothing on stderr; no request is made (EQ_API_URL points at a port
nothing listens on, which would exit 3). `--help` stays text and exits 0.

    python3 tests/skill/usage_test.py     (ctest: skill_usage)
"""

import json
import os
import socket
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "integrations", "skill", "scripts", "eqreply.py")


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, key="eq_live_usage-test"):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EQ_")}
    env["EQ_API_URL"] = f"http://127.0.0.1:{closed_port()}"
    if key is not None:
        env["EQ_API_KEY"] = key
    return subprocess.run([sys.executable, SCRIPT, *args], env=env, capture_output=True,
                          text=True, timeout=30)


# (arguments, a part of the message, EQ_API_KEY)
BAD = [
    (["reply", "hi", "--count", "9"], "--count", "k"),
    (["reply", "hi", "--count", "x"], "--count", "k"),
    (["reply", "hi", "--mode", "slow"], "--mode", "k"),
    (["reply"], "message", "k"),
    (["reply", "hi", "--wait"], "--wait needs --async", "k"),
    (["reply", "hi", "--webhook-url", "https://hooks.example/x"], "--webhook-url needs --async", "k"),
    (["task"], "task_id", "k"),
    (["frobnicate"], "frobnicate", "k"),
    ([], "command", "k"),
    (["quota", "--bogus"], "--bogus", "k"),
    (["quota"], "EQ_API_KEY", None),
]

failures = []
for args, part, key in BAD:
    r = run(args, key)
    what = " ".join(args) or "(no arguments)"
    try:
        out = json.loads(r.stdout)
    except ValueError:
        failures.append(f"{what}: stdout is not one JSON object: {r.stdout!r} (stderr {r.stderr!r})")
        continue
    if r.returncode != 2:
        failures.append(f"{what}: exit status {r.returncode}, not 2")
    if r.stderr:
        failures.append(f"{what}: wrote on stderr: {r.stderr!r}")
    if out.get("ok") is not False or "status" not in out or out["status"] is not None:
        failures.append(f"{what}: not the usage error object: {out}")
    if part not in out.get("msg", ""):
        failures.append(f"{what}: msg does not name {part!r}: {out.get('msg')!r}")
    if not out.get("usage", "").startswith("usage: eqreply"):
        failures.append(f"{what}: no usage: {out}")
    if out.get("retryable") is not False or not out.get("hint"):
        failures.append(f"{what}: retryable and hint: {out}")

for args in (["--help"], ["reply", "--help"]):
    r = run(args)
    if r.returncode != 0 or not r.stdout.startswith("usage: eqreply"):
        failures.append(f"{' '.join(args)}: exit {r.returncode}, stdout {r.stdout[:80]!r}")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"usage_test: ok ({len(BAD)} bad command lines, 2 --help)")
