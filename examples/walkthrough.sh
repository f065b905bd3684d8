#!/usr/bin/env bash
# A tour of the EQ Reply API with curl: quota, a synchronous reply, an
# analysis, an asynchronous task with a webhook, polling that task, and the
# quota again. Every request and response is printed.
#
#   EQ_API_KEY=eq_live_... examples/walkthrough.sh
#
# EQ_API_KEY   required: a key from the operator (`eqctl key create --name you`)
# EQ_URL       the service (default http://127.0.0.1:8080)
# WEBHOOK_URL  optional: where the async task's result is POSTed, e.g. the
#              receiver of examples/webhook_receiver.py (http://127.0.0.1:9000/hook);
#              the service refuses private addresses unless its operator
#              allows them (EQ_WEBHOOK_ALLOW_CIDRS)
# EQ_POLL_SECONDS  how long to poll the task (default 120)
#
# Needs curl and python3 (only to read fields out of the JSON answers).
# Exits non-zero at the first request that does not answer as expected.
set -euo pipefail

: "${EQ_API_KEY:?set EQ_API_KEY to a key from eqctl key create}"
EQ_URL="${EQ_URL:-http://127.0.0.1:8080}"
WEBHOOK_URL="${WEBHOOK_URL:-}"
EQ_POLL_SECONDS="${EQ_POLL_SECONDS:-120}"

# call METHOD PATH [JSON_BODY [-H HEADER...]]: prints the exchange,
# leaves the body in $body and the HTTP status in $status.
call() {
  local method=$1 path=$2 data=${3:-}
  shift 3 2>/dev/null || shift $#
  local args=(-sS -X "$method" "$EQ_URL$path" -H "Authorization: Bearer $EQ_API_KEY"
              -w '\n%{http_code}' "$@")
  if [[ -n $data ]]; then
    args+=(-H 'Content-Type: application/json' --data-binary "$data")
  fi
  local shown="curl -X $method $EQ_URL$path -H 'Authorization: Bearer \$EQ_API_KEY'"
  local extra
  for extra in "$@"; do [[ $extra == -H ]] || shown+=" -H '$extra'"; done
  [[ -z $data ]] || shown+=" -H 'Content-Type: application/json' -d '$data'"
  echo "\$ $shown"
  local out
  out=$(curl "${args[@]}")
  status=${out##*$'\n'}
  body=${out%$'\n'*}
  echo "HTTP $status $body"
  echo
}

# field JSON PATH: one field of a JSON document by dotted path, e.g.
# field "$body" data.replies.0.text (objects and arrays print as JSON).
field() {
  python3 - "$1" "$2" <<'PY'
import json, sys
v = json.loads(sys.argv[1])
for part in sys.argv[2].split("."):
    v = v[int(part)] if isinstance(v, list) else v[part]
print(json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v)
PY
}

expect() {
  if [[ $status != "$1" ]]; then
    echo "walkthrough: expected HTTP $1, got $status" >&2
    exit 1
  fi
}

echo "== 1. Quota: remaining units per mode"
call GET /api/v1/quota
expect 200
fast_before=$(field "$body" "data.quota.fast")

echo "== 2. A synchronous reply (fast mode, three candidates)"
call POST /api/v1/reply '{"mode":"fast","message":"今天被老板骂了，好难过","reply_count":3}'
expect 200
echo "best reply: $(field "$body" "data.replies.0.text")"
echo

echo "== 3. Emotion and intent of a message (charges no quota)"
call POST /api/v1/analyze '{"message":"你最近是不是很忙？都不怎么回我消息了","context":"暧昧期"}'
expect 200
echo "emotion: $(field "$body" "data.emotion"), intensity $(field "$body" "data.intensity")"
echo

echo "== 4. An asynchronous task, with an Idempotency-Key so a retried POST cannot run twice"
idem="walkthrough-$(date +%s)-$$"
async_body='{"mode":"fast","message":"周末要不要一起去看电影？","scene":"dating","reply_count":2'
if [[ -n $WEBHOOK_URL ]]; then
  async_body+=",\"webhook_url\":\"$WEBHOOK_URL\""
fi
async_body+='}'
call POST /api/v1/reply/async "$async_body" -H "Idempotency-Key: $idem"
expect 200
task_id=$(field "$body" "data.task_id")
echo "task_id: $task_id"
echo
echo "   The same request with the same Idempotency-Key returns the same task:"
call POST /api/v1/reply/async "$async_body" -H "Idempotency-Key: $idem"
expect 200
if [[ $(field "$body" "data.task_id") != "$task_id" ]]; then
  echo "walkthrough: the repeated request made a new task" >&2
  exit 1
fi

echo "== 5. Poll the task until it has finished (the webhook, if any, brings the same result)"
deadline=$((SECONDS + EQ_POLL_SECONDS))
while :; do
  call GET "/api/v1/task/$task_id"
  expect 200
  task_status=$(field "$body" "data.status")
  case $task_status in
    succeeded) break ;;
    failed) echo "walkthrough: task failed: $(field "$body" "data.error")" >&2; exit 1 ;;
  esac
  if ((SECONDS >= deadline)); then
    echo "walkthrough: task still $task_status after ${EQ_POLL_SECONDS}s" >&2
    exit 1
  fi
  sleep 1
done
echo "replies: $(field "$body" "data.result.replies")"
if [[ -n $WEBHOOK_URL ]]; then
  echo "webhook: $(field "$body" "data.webhook")"
fi
echo

echo "== 6. Quota again: each reply call (sync or async) took one unit of its mode"
call GET /api/v1/quota
expect 200
fast_after=$(field "$body" "data.quota.fast")
echo "fast: $fast_before -> $fast_after"
echo "walkthrough: ok task_id=$task_id"
