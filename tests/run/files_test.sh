#!/usr/bin/env bash
# Files only for their owner (issue 27, item 4; docs/operations.md, "Files
# and their modes"), with the real binaries and scripts/run, started from a
# shell whose umask (022) would make every file world-readable:
#   1. eqctl migrate creates the database 0600, and eqctl tightens one an older version
#      left 0644; eq-api's -wal and -shm beside it are 0600 too.
#   2. scripts/run on a var folder left open (0755, a 0644 log): once the
#      stack is up, no file under it outside the broker's own folder is
#      open to group or others, the folder is 0700 (0710 with group
#      rabbitmq when the broker runs as that user), and another user can
#      neither list it nor read the database.
#   tests/run/files_test.sh   (ctest: run_files)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${EQ_BUILD_DIR:-$root/build}"
umask 022
tmp="$(mktemp -d "${TMPDIR:-/tmp}/eq-files-test-XXXXXX")"
chmod 755 "$tmp"
run_pid=0 api_pid=0
out="$tmp/run.out"
fail() {
  echo "FAIL: $*" >&2
  [[ -s "$out" ]] && { echo "--- scripts/run output:" >&2; tail -n 40 "$out" >&2; }
  exit 1
}
cleanup() {
  if [[ $api_pid -gt 0 ]]; then kill -TERM "$api_pid" 2>/dev/null || true; wait "$api_pid" 2>/dev/null || true; fi
  if [[ $run_pid -gt 0 ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mode() { stat -c %a "$1"; }
expect_mode() {  # expect_mode MODE PATH
  [[ -e "$2" ]] || fail "$2 does not exist"
  [[ "$(mode "$2")" == "$1" ]] || fail "$2 is mode $(mode "$2"), not $1"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. The binaries, without a broker.
db="$tmp/bin/eq.db"
mkdir -p "$tmp/bin"
EQ_DB_PATH="$db" "$bin/eqctl" migrate >/dev/null
expect_mode 600 "$db"
EQ_DB_PATH="$db" "$bin/eqctl" key create --name files --json >/dev/null
chmod 644 "$db"
EQ_DB_PATH="$db" "$bin/eqctl" key list >/dev/null
expect_mode 600 "$db"
# eq-api keeps the database open (and its WAL files present) while it waits
# for a broker that is not there.
chmod 644 "$db"
EQ_DB_PATH="$db" EQ_HTTP_PORT=0 EQ_AMQP_URL="amqp://eq:eq@127.0.0.1:$(free_port)/" \
  EQ_INTERNAL_KEY="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
  EQ_LOG_LEVEL=error "$bin/eq-api" 2>"$tmp/api.err" &
api_pid=$!
for _ in $(seq 100); do
  [[ -e "$db-wal" && -e "$db-shm" ]] && break
  kill -0 "$api_pid" 2>/dev/null || fail "eq-api exited: $(cat "$tmp/api.err")"
  sleep 0.1
done
expect_mode 600 "$db"
expect_mode 600 "$db-wal"
expect_mode 600 "$db-shm"
kill -TERM "$api_pid"; wait "$api_pid" 2>/dev/null || true; api_pid=0

# 2. scripts/run, on a var folder an older version left open.
var="$tmp/var"
mkdir -p "$var/log"
chmod 755 "$var" "$var/log"
echo old >"$var/log/api.log"
chmod 644 "$var/log/api.log"
export EQ_VAR_DIR="$var" EQ_HTTP_PORT="$(free_port)" EQ_PORTAL=off
export EQ_AMQP_PORT="$(free_port)" EQ_RABBITMQ_MGMT_PORT="$(free_port)" EQ_RABBITMQ_PROM_PORT="$(free_port)"
unset EQ_AMQP_URL EQ_DB_PATH EQ_METRICS_PORT
"$root/scripts/run" >"$out" 2>&1 &
run_pid=$!
base="http://127.0.0.1:$EQ_HTTP_PORT"
for _ in $(seq 900); do
  curl -sf -o /dev/null "$base/readyz" && break
  kill -0 "$run_pid" 2>/dev/null || fail "scripts/run exited"
  sleep 0.2
done
curl -sf -o /dev/null "$base/readyz" || fail "stack not ready"

if [[ "$(id -u)" -eq 0 ]] && [[ "$(stat -c %U "$var/rabbitmq")" == rabbitmq ]]; then
  expect_mode 710 "$var"
  [[ "$(stat -c %G "$var")" == rabbitmq ]] || fail "$var is group $(stat -c %G "$var"), not rabbitmq"
else
  expect_mode 700 "$var"
fi
expect_mode 700 "$var/log"
for f in eq.db eq.db-wal eq.db-shm broker.env secrets.env log/api.log log/dispatcher.log log/rabbitmq.out; do
  expect_mode 600 "$var/$f"
done
open_files="$(find "$var" -path "$var/rabbitmq" -prune -o -perm /077 -print | grep -vx "$var" || true)"
[[ -z "$open_files" ]] || fail "open to group or others: $open_files"
if [[ "$(id -u)" -eq 0 ]]; then
  ! runuser -u nobody -- ls "$var" >/dev/null 2>&1 || fail "another user lists $var"
  ! runuser -u nobody -- cat "$var/eq.db" >/dev/null 2>&1 || fail "another user reads the database"
  if id rabbitmq >/dev/null 2>&1; then
    ! runuser -u rabbitmq -- cat "$var/eq.db" >/dev/null 2>&1 || fail "the broker's user reads the database"
  fi
fi

kill -TERM "$run_pid"
rc=0
wait "$run_pid" || rc=$?
run_pid=0
[[ $rc -eq 0 ]] || fail "scripts/run exited with $rc on SIGTERM"
echo "run_files: database, WAL files, logs and broker.env 0600, var folder closed to others"
