#!/usr/bin/env bash
# The client libraries (clients/typescript, clients/python; docs/contract.md
# §12) against one live stack (issue 26): scripts/run in a temporary
# EQ_VAR_DIR on a free port, keys made with scripts/eqctl, then side by side
#   - node --test: the TypeScript package, built from schema/openapi.yaml
#     first (offline rules, every endpoint, 401/402/404/400, idempotency,
#     waitForTask, a webhook verified, tampered and stale ones rejected;
#     a 429's Retry-After honoured);
#   - python3 -m unittest: the same for the Python package, installed with
#     pip from its folder, offline (--no-index);
#   - tsc --noEmit on clients/typescript/examples/usage.ts;
#   - the quick starts of both READMEs (their ```sh blocks after the
#     `clients-quickstart` marker), as written;
#   - examples/webhook_receiver.mjs and webhook_receiver_client.py, each
#     taking a real delivery.
# The 429 cases wait for their key's one-minute window to turn (up to 60 s):
# they start first and run beside everything else. The stack is stopped
# whatever happens.
#   tests/clients/run.sh   (ctest: clients; needs clients/typescript/node_modules,
#                           which scripts/test installs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../run/lib.sh
source "$root/tests/run/lib.sh"
ts="$root/clients/typescript"
py="$root/clients/python"
[[ -x "$ts/node_modules/.bin/tsc" ]] ||
  fail "$ts/node_modules is missing: scripts/test installs it (or: cd clients/typescript && npm ci)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/eq-clients-test-XXXXXX")"
run_pid=0
jobs_started=()
cleanup() {
  local pid
  for pid in "${jobs_started[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [[ $run_pid -gt 0 ]] && kill -0 "$run_pid" 2>/dev/null; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
    echo "clients: [+${SECONDS}s] stack stopped"
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stack_fail() {
  echo "--- scripts/run output:" >&2
  tail -n 40 "$tmp/run.out" >&2 || true
  fail "$@"
}

# The stack: free ports everywhere (never the defaults a developer's stack
# may hold), no developer center and no worker metrics listeners.
export EQ_VAR_DIR="$tmp/var" EQ_HTTP_PORT="$(free_port)" EQ_PORTAL=off EQ_METRICS_PORT=off
export EQ_AMQP_PORT="$(free_port)" EQ_RABBITMQ_MGMT_PORT="$(free_port)" EQ_RABBITMQ_PROM_PORT="$(free_port)"
unset EQ_AMQP_URL EQ_DB_URL EQ_DB_PATH EQ_STORE EQ_HTTP_HOST EQ_WEBHOOK_ALLOW_CIDRS EQ_ENV EQ_ENGINE
"$root/scripts/run" >"$tmp/run.out" 2>&1 &
run_pid=$!

# While the broker starts: build the TypeScript package (its types generated
# from schema/openapi.yaml), type-check the example, install the Python one.
(cd "$ts" && npm run --silent build && npm run --silent typecheck) >"$tmp/ts-build.log" 2>&1 ||
  { cat "$tmp/ts-build.log" >&2; fail "clients/typescript: build or type check failed"; }
PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --quiet --no-index --target "$tmp/site" "$py" \
  >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log" >&2; fail "pip install clients/python failed offline"; }

export EQ_API_URL="http://127.0.0.1:$EQ_HTTP_PORT"
for _ in $(seq 600); do
  curl -sf -o /dev/null "$EQ_API_URL/readyz" && break
  kill -0 "$run_pid" 2>/dev/null || stack_fail "scripts/run exited"
  sleep 0.2
done
curl -sf -o /dev/null "$EQ_API_URL/readyz" || stack_fail "the stack is not ready after 120 s"
echo "clients: [+${SECONDS}s] stack ready, packages built"

# key NAME [OPTIONS...]: a new account's key as JSON.
key() { "$root/scripts/eqctl" key create --name "$@" --json; }
# A key of their own for each language's rate-limit case (1 request a
# minute), the rest of each language on a key with room for its polls.
ts_rate1="$(key ts-rate1 --rate 1 | json api_key)"
py_rate1="$(key py-rate1 --rate 1 | json api_key)"
no_perfect="$(key no-perfect --quota-perfect 0 --rate 600 | json api_key)"

# Each suite: its own key and webhook secret; output kept for a failure.
suite() {  # suite NAME KEY_NAME COMMAND...
  local name="$1" created
  created="$(key "$2" --rate 600)"
  shift 2
  (EQ_API_KEY="$(json api_key <<<"$created")" EQ_WEBHOOK_SECRET="$(json webhook_secret <<<"$created")" \
     EQ_API_KEY_NO_PERFECT="$no_perfect" EQ_API_KEY_RATE1="$ts_rate1" EQ_API_KEY_RATE1_PY="$py_rate1" \
     "$@") >"$tmp/$name.log" 2>&1
}
declare -A job_names
start_suite() {  # start_suite NAME KEY_NAME COMMAND...
  suite "$@" &
  jobs_started+=($!)
  job_names[$!]="$1"
}

export PYTHONPATH="$tmp/site:$py/tests"
# The rate-limit cases first: they wait for a window to turn.
start_suite py-rate python-rate python3 -m unittest -v test_rate_limit
start_suite typescript typescript bash -c "cd '$ts' && node --test --test-concurrency=3 test/"
start_suite python python python3 -m unittest -v test_offline test_live

# The quick starts as the READMEs give them: the TypeScript one in a project
# that has the package installed (a link to the built folder), the Python
# one with the package pip installed above.
mkdir -p "$tmp/ts-project/node_modules" "$tmp/py-project"
ln -s "$ts" "$tmp/ts-project/node_modules/eq-reply"
run_quickstart() {  # run_quickstart NAME README DIR
  local block
  block="$(doc_block clients-quickstart "$2")"
  [[ -n "$block" ]] || { echo "no sh block after <!-- clients-quickstart in $2"; return 1; }
  (cd "$3" && bash -euo pipefail -c "$block")
}
start_suite ts-quickstart ts-quickstart run_quickstart ts "$ts/README.md" "$tmp/ts-project"
start_suite py-quickstart py-quickstart run_quickstart py "$py/README.md" "$tmp/py-project"

# The example receivers of examples/ take a real delivery: started on a free
# port, sent a task with their URL, they must log it accepted.
cp "$root/examples/webhook_receiver.mjs" "$tmp/ts-project/"
example_receiver() {  # example_receiver NAME COMMAND...
  local name="$1" out="$tmp/$1.out" pid url task_id
  shift
  "$@" >"$out" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    url="$(sed -n 's/^{"listening": *"\(.*\)"}$/\1/p' "$out")"
    [[ -n "$url" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$out"; return 1; }
    sleep 0.1
  done
  [[ -n "$url" ]] || { echo "$name: no listening line"; kill "$pid"; return 1; }
  task_id="$(python3 -c 'import os, sys
from eq_reply import Client
print(Client(os.environ["EQ_API_URL"], os.environ["EQ_API_KEY"]).reply_async(
    "fast", "收到请回复", webhook_url=sys.argv[1]).task_id)' "$url")"
  for _ in $(seq 200); do
    grep -q "\"verdict\": *\"accepted\".*\"task_id\": *\"$task_id\"" "$out" && break
    sleep 0.1
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  cat "$out"
  grep -q "\"verdict\": *\"accepted\".*\"task_id\": *\"$task_id\"" "$out" ||
    { echo "$name: task $task_id not accepted"; return 1; }
}
examples() {
  (cd "$tmp/ts-project" &&
     example_receiver receiver-ts env EQ_WEBHOOK_SECRET="$EQ_WEBHOOK_SECRET" node webhook_receiver.mjs 0) &&
    example_receiver receiver-py env EQ_WEBHOOK_SECRET="$EQ_WEBHOOK_SECRET" \
      python3 "$root/examples/webhook_receiver_client.py" 0
}
start_suite examples examples examples

failed=()
for pid in "${jobs_started[@]}"; do
  if ! wait "$pid"; then failed+=("${job_names[$pid]}"); fi
done
jobs_started=()
echo "clients: [+${SECONDS}s] suites done"
for name in ts-quickstart py-quickstart examples; do
  echo "--- $name:"; cat "$tmp/$name.log"
done
grep -h -E '^# (tests|pass|fail)|^(Ran|OK|FAILED)' "$tmp"/{typescript,python,py-rate}.log || true
for name in "${failed[@]}"; do
  echo "--- $name (failed):" >&2
  tail -n 80 "$tmp/$name.log" >&2
done
[[ ${#failed[@]} -eq 0 ]] || stack_fail "failed: ${failed[*]}"
# What the quick starts print at their end.
grep -q '^task succeeded' "$tmp/ts-quickstart.log" || fail "the TypeScript quick start did not end with its task"
grep -q '^task succeeded' "$tmp/py-quickstart.log" || fail "the Python quick start did not end with its task"
echo "clients: TypeScript and Python clients pass against one stack"
