#!/usr/bin/env bash
# Where scripts/run listens, and whom its webhooks may reach (issue 27,
# item 5b; README "Quick start"):
#   1. by default eq-api and the metrics listeners are bound to 127.0.0.1
#      only, and an async call may name a webhook on this machine;
#   2. with EQ_HTTP_HOST=0.0.0.0 they listen on every address, and a webhook
#      to a loopback address is refused (400) like in production, because
#      any key holder on the network could otherwise make the dispatcher
#      POST to this machine's local services.
#   tests/run/listen_test.sh   (ctest: run_listen)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
var="$(mktemp -d "${TMPDIR:-/tmp}/eq-listen-test-XXXXXX")"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export EQ_VAR_DIR="$var" EQ_HTTP_PORT="$(free_port)" EQ_PORTAL=off
export EQ_AMQP_PORT="$(free_port)" EQ_RABBITMQ_MGMT_PORT="$(free_port)" EQ_RABBITMQ_PROM_PORT="$(free_port)"
unset EQ_AMQP_URL EQ_DB_PATH EQ_METRICS_PORT EQ_HTTP_HOST EQ_METRICS_HOST EQ_WEBHOOK_ALLOW_CIDRS
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
base="http://127.0.0.1:$EQ_HTTP_PORT"

start_stack() {  # start_stack [ENV=value...]
  : >"$out"
  env "$@" "$root/scripts/run" >"$out" 2>&1 &
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
# The local addresses listening on PORT, one per line.
listeners() { ss -Hltn "sport = :$1" | awk '{print $4}' | sort -u; }
# The dispatcher's metrics port, from the line scripts/run printed.
dispatcher_metrics_port() {
  grep -o '[0-9]* (dispatcher)' "$out" | head -1 | cut -d' ' -f1
}
# POST /api/v1/reply/async naming a webhook on this machine: the status.
async_to_loopback() {
  curl -s -o /dev/null -w '%{http_code}' "$base/api/v1/reply/async" \
    -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d '{"mode":"fast","message":"你好","webhook_url":"http://127.0.0.1:9/hook"}'
}

# 1. The default: loopback only.
start_stack
key="$(grep -o 'eq_live_[A-Za-z0-9_-]\{43\}' "$out" | head -1)"
[[ -n $key ]] || fail "no demo key in the output"
[[ "$(listeners "$EQ_HTTP_PORT")" == "127.0.0.1:$EQ_HTTP_PORT" ]] ||
  fail "eq-api listens on $(listeners "$EQ_HTTP_PORT" | tr '\n' ' '), not 127.0.0.1 only"
mport="$(dispatcher_metrics_port)"
[[ -n $mport ]] || fail "no dispatcher metrics port printed"
for _ in $(seq 50); do [[ -n "$(listeners "$mport")" ]] && break; sleep 0.2; done
[[ "$(listeners "$mport")" == "127.0.0.1:$mport" ]] ||
  fail "the dispatcher's metrics listen on $(listeners "$mport" | tr '\n' ' '), not 127.0.0.1 only"
grep -q "listening on 127.0.0.1 only" "$out" || fail "the banner does not say where it listens"
status="$(async_to_loopback)"
[[ "$status" == 200 || "$status" == 202 ]] || fail "a loopback webhook was refused ($status) on a loopback stack"
stop_stack

# 2. Open to the network: every address, and no webhooks to loopback.
start_stack EQ_HTTP_HOST=0.0.0.0
[[ "$(listeners "$EQ_HTTP_PORT")" == "0.0.0.0:$EQ_HTTP_PORT" ]] ||
  fail "eq-api listens on $(listeners "$EQ_HTTP_PORT" | tr '\n' ' '), not 0.0.0.0"
status="$(async_to_loopback)"
[[ "$status" == 400 ]] || fail "a loopback webhook got $status, not 400, on a stack open to the network"
stop_stack
echo "run_listen: loopback by default with local webhooks; EQ_HTTP_HOST=0.0.0.0 refuses them"
