#!/usr/bin/env bash
# `EQ_STORE=postgres scripts/run` (issue 23, item 5): the stack on a private
# PostgreSQL server it starts in EQ_VAR_DIR on a free port and stops with
# itself, as a user would try it:
#   1. it starts, prints the database without its password, and answers a
#      sync call, an async call with its webhook and GET /quota;
#   2. scripts/eqctl, given nothing but EQ_VAR_DIR, works on that database
#      (the key it creates answers), and no SQLite file appears;
#   3. stopped with SIGTERM, the server stops too; started again, the same
#      data is there (the key still answers, the task is still found).
#   tests/run/postgres_test.sh   (ctest: run_postgres)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
var="$(mktemp -d "${TMPDIR:-/tmp}/eq-pg-run-test-XXXXXX")"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export EQ_VAR_DIR="$var" EQ_HTTP_PORT="$(free_port)" EQ_PORTAL=off EQ_STORE=postgres
export EQ_AMQP_PORT="$(free_port)" EQ_RABBITMQ_MGMT_PORT="$(free_port)" EQ_RABBITMQ_PROM_PORT="$(free_port)"
unset EQ_AMQP_URL EQ_DB_URL EQ_DB_PATH EQ_METRICS_PORT EQ_HTTP_HOST EQ_METRICS_HOST EQ_PG_PORT
out="$var/run.out"
run_pid=0
hook_pid=0
fail() {
  echo "FAIL: $*" >&2
  echo "--- scripts/run output:" >&2
  tail -n 40 "$out" >&2 || true
  exit 1
}
cleanup() {
  [[ $hook_pid -gt 0 ]] && kill "$hook_pid" 2>/dev/null
  if [[ $run_pid -gt 0 ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  # Whatever happened, no server of this test is left running.
  (source "$root/scripts/lib/postgres.sh" && eq_postgres_stop "$var" >/dev/null 2>&1) || true
  rm -rf "$var"
}
trap cleanup EXIT
base="http://127.0.0.1:$EQ_HTTP_PORT"

start_stack() {
  : >"$out"
  "$root/scripts/run" >"$out" 2>&1 &
  run_pid=$!
  for _ in $(seq 900); do
    curl -sf -o /dev/null "$base/readyz" && return 0
    kill -0 "$run_pid" 2>/dev/null || fail "scripts/run exited"
    sleep 0.2
  done
  fail "stack not ready"
}
stop_stack() {
  kill -TERM "$run_pid"
  local rc=0
  wait "$run_pid" || rc=$?
  run_pid=0
  [[ $rc -eq 0 ]] || fail "scripts/run exited with $rc on SIGTERM"
}
server_running() {
  [[ -f "$var/postgres/data/postmaster.pid" ]] &&
    kill -0 "$(head -1 "$var/postgres/data/postmaster.pid")" 2>/dev/null
}
call() {  # call KEY PATH [BODY]: prints the HTTP status, the body in $var/body
  local args=(-s -o "$var/body" -w '%{http_code}' "$base$2" -H "Authorization: Bearer $1")
  [[ $# -ge 3 ]] && args+=(-H 'Content-Type: application/json' -d "$3")
  curl "${args[@]}"
}
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$1)" "$var/body"; }

# 1. The stack on its own PostgreSQL.
start_stack
grep -q 'Database:       postgresql://eq:\*\*\*@127.0.0.1:' "$out" ||
  fail "the banner does not show the PostgreSQL URL without its password"
password="$(. "$var/postgres/postgres.env" && printf '%s' "$EQ_PG_PASSWORD")"
grep -qF -- "$password" "$out" && fail "the database password is in scripts/run's output"
opened_postgres() {  # opened_postgres LOG: the process logged its database within 30 s
  for _ in $(seq 150); do
    grep -q '"database":"postgresql://' "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}
# /readyz answers once eq-api is up; the dispatcher starts beside it and may
# log a moment later.
opened_postgres "$var/log/api.log" || fail "eq-api did not open PostgreSQL"
opened_postgres "$var/log/dispatcher.log" || fail "eq-dispatcher did not open PostgreSQL"
key="$(grep -o 'eq_live_[A-Za-z0-9_-]\{43\}' "$out" | head -1)"
[[ -n $key ]] || fail "no demo key in the output"
status="$(call "$key" /api/v1/reply '{"mode":"fast","message":"今天被老板骂了，好难过","reply_count":2}')"
[[ $status == 200 ]] || fail "sync reply answered $status: $(cat "$var/body")"
[[ "$(json "['data']['replies'].__len__()")" == 2 ]] || fail "not two replies: $(cat "$var/body")"

# An async call whose webhook a small receiver on this machine takes.
hook_port="$(free_port)"
python3 - "$hook_port" "$var/hook.json" <<'PY' &
import http.server, sys
port, path = int(sys.argv[1]), sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(path, "wb") as f:
            f.write(body)
        self.send_response(200)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
hook_pid=$!
status="$(call "$key" /api/v1/reply/async "{\"mode\":\"standard\",\"message\":\"我们分手吧\",\"webhook_url\":\"http://127.0.0.1:$hook_port/hook\"}")"
[[ $status == 200 || $status == 202 ]] || fail "async reply answered $status: $(cat "$var/body")"
task="$(json "['data']['task_id']")"
for _ in $(seq 100); do [[ -s "$var/hook.json" ]] && break; sleep 0.2; done
grep -q "\"$task\"" "$var/hook.json" 2>/dev/null || fail "no webhook for $task"
grep -q '"task.succeeded"' "$var/hook.json" || fail "the webhook is not task.succeeded: $(cat "$var/hook.json")"
status="$(call "$key" /api/v1/quota)"
[[ $status == 200 ]] || fail "quota answered $status"

# 2. scripts/eqctl finds the stack's database by itself.
created="$(EQ_VAR_DIR="$var" "$root/scripts/eqctl" key create --name second --json)" ||
  fail "scripts/eqctl key create failed: $created"
key2="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])' <<<"$created")"
status="$(call "$key2" /api/v1/quota)"
[[ $status == 200 ]] || fail "the key scripts/eqctl created answers $status: not the stack's database"
[[ ! -e "$var/eq.db" ]] || fail "a SQLite file was created beside the PostgreSQL stack"
EQ_VAR_DIR="$var" "$root/scripts/eqctl" task show "$task" >/dev/null ||
  fail "scripts/eqctl does not find task $task"

# 3. Stopped together, started again on the same data.
stop_stack
server_running && fail "PostgreSQL still runs after the stack stopped"
start_stack
status="$(call "$key" /api/v1/task/"$task")"
[[ $status == 200 ]] || fail "task $task not found after a restart ($status)"
[[ "$(json "['data']['status']")" == succeeded ]] || fail "task $task: $(cat "$var/body")"
stop_stack
server_running && fail "PostgreSQL still runs after the second stop"
echo "run_postgres: EQ_STORE=postgres runs the stack on its own PostgreSQL; eqctl finds it; data survives a restart"
