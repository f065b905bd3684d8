#!/usr/bin/env bash
# scripts/run as a person uses it: starts the stack on free ports, then
# SIGKILLs a worker three times in a row and eq-api once and expects each to
# be restarted (and said so) while the rest keeps serving, the worker's wait
# doubling each time (1 s, 2 s, 4 s: it keeps dying within a minute of its
# start), and a sync reply to work afterwards; SIGTERM then stops
# everything, broker included, with status 0. Then a second start with a
# configuration error (every process exits with status 2): nothing is
# restarted, and the stack stops by itself, broker included, with a
# non-zero status. Delays are checked as printed, never timed.
#   tests/run/supervision_test.sh   (ctest: run_supervision)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
var="$(mktemp -d "${TMPDIR:-/tmp}/eq-run-test-XXXXXX")"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export EQ_VAR_DIR="$var" EQ_HTTP_PORT="$(free_port)" EQ_METRICS_PORT=off
# Never the test broker's ports that scripts/test exported.
export EQ_AMQP_PORT="$(free_port)" EQ_RABBITMQ_MGMT_PORT="$(free_port)" EQ_RABBITMQ_PROM_PORT="$(free_port)"
unset EQ_AMQP_URL EQ_DB_PATH
out="$var/run.out"
run_pid=0
fail() {
  echo "FAIL: $*" >&2
  echo "--- scripts/run output:" >&2
  tail -n 40 "$out" >&2 || true
  exit 1
}
cleanup() {
  if [[ $run_pid -gt 0 ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  rm -rf "$var"
}
trap cleanup EXIT

"$root/scripts/run" >"$out" 2>&1 &
run_pid=$!
base="http://127.0.0.1:$EQ_HTTP_PORT"
ready() { curl -sf -o /dev/null "$base/readyz"; }
wait_for() {  # wait_for SECONDS COMMAND...
  local until=$((SECONDS + $1)); shift
  until "$@"; do
    (( SECONDS < until )) || return 1
    kill -0 "$run_pid" 2>/dev/null || fail "scripts/run exited"
    sleep 0.2
  done
}
wait_for 180 ready || fail "stack not ready"
key="$(grep -o 'eq_live_[A-Za-z0-9_-]\{43\}' "$out" | head -1)"
[[ -n $key ]] || fail "no demo key in the output"

# The pid of this stack's process running BINARY (by its database path).
pid_of() {
  local p
  for p in $(pgrep -x "$1"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "EQ_DB_PATH=$var/eq.db"; then
      if [[ -z ${2:-} ]] || tr '\0' ' ' <"/proc/$p/cmdline" | grep -q -- "$2"; then echo "$p"; return; fi
    fi
  done
}
reply() {
  curl -sf "$base/api/v1/reply" -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"mode":"fast","message":"今天被老板骂了，好难过"}' | grep -q '"code":0'
}

# Three deaths in a row, each within a minute of the worker's start: the
# supervisor waits 1 s, then 2 s, then 4 s before the restart.
new_worker() { local p; p="$(pid_of eq-worker 'mode fast')"; [[ -n $p && $p != "$worker" ]]; }
for delay in 1 2 4; do
  worker="$(pid_of eq-worker 'mode fast')"
  [[ -n $worker ]] || fail "no fast worker found"
  kill -KILL "$worker"
  wait_for 30 grep -q "run: worker-fast exited (status 137); restarting it in ${delay}s" "$out" ||
    fail "no restart line for the worker with a ${delay}s wait"
  wait_for 30 new_worker || fail "worker not restarted after the ${delay}s wait"
done
delays="$(grep -o 'run: worker-fast exited (status 137); restarting it in [0-9]*s' "$out" |
  sed 's/.* in //' | tr '\n' ' ')"
[[ "$delays" == "1s 2s 4s " ]] || fail "the worker's waits were '$delays', not '1s 2s 4s '"
wait_for 30 reply || fail "no sync reply after the worker's restarts"

api="$(pid_of eq-api)"
[[ -n $api ]] || fail "no eq-api found"
kill -KILL "$api"
wait_for 30 grep -q "run: api exited (status 137); restarting" "$out" || fail "no restart line for eq-api"
wait_for 30 ready || fail "eq-api not back"
wait_for 30 reply || fail "no sync reply after eq-api's restart"

kill -TERM "$run_pid"
rc=0
wait "$run_pid" || rc=$?
run_pid=0
[[ $rc -eq 0 ]] || fail "scripts/run exited with $rc on SIGTERM"
grep -q "run: stopped" "$out" || fail "no 'run: stopped' line"
[[ -z "$(pid_of eq-api)$(pid_of eq-worker)$(pid_of eq-dispatcher)" ]] || fail "processes left running"

# A configuration error: EQ_ENGINE names no engine, which every process
# refuses at start with status 2 (Config::fromEnv). The demo key exists
# already and the developer center is off, so no eqctl call stops
# scripts/run first: the processes themselves must. A restart cannot fix
# that, so the supervisor must not try, and the stack must stop.
: >"$out"
EQ_ENGINE=not-an-engine EQ_PORTAL=off "$root/scripts/run" >"$out" 2>&1 &
run_pid=$!
rc=0
for _ in $(seq 900); do
  kill -0 "$run_pid" 2>/dev/null || break
  sleep 0.2
done
kill -0 "$run_pid" 2>/dev/null && fail "scripts/run kept running with a configuration error"
wait "$run_pid" || rc=$?
run_pid=0
[[ $rc -ne 0 ]] || fail "scripts/run exited 0 with a configuration error"
grep -q "exited with status 2 (configuration error); not restarting" "$out" ||
  fail "no 'not restarting' line"
! grep -q "restarting it in" "$out" || fail "a process with a configuration error was restarted"
grep -q "run: a process cannot run (status 2); stopping the stack" "$out" ||
  fail "no line saying the stack stops"
grep -q "run: stopped" "$out" || fail "no 'run: stopped' line after the configuration error"
[[ -z "$(pid_of eq-api)$(pid_of eq-worker)$(pid_of eq-dispatcher)" ]] ||
  fail "processes left running after the configuration error"
[[ ! -f "$var/rabbitmq/node.env" ]] || fail "the broker was left running after the configuration error"
echo "run_supervision: worker restarted after 1 s, 2 s and 4 s, eq-api restarted, replies served," \
  "clean stop; a configuration error stopped the stack without a restart (status $rc)"
