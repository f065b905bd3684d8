#!/usr/bin/env bash
# scripts/eqctl finds the stack scripts/run placed, and never creates a
# database (issue 28, item 1):
#   1. in a folder without a database, a command exits 2, says where it
#      looked and how to point eqctl, and leaves nothing behind;
#   2. `eqctl migrate` is what makes one;
#   3. the settings scripts/run records beside the database's URL in
#      EQ_VAR_DIR/store.env (here: where the developer center's links point,
#      and the webhook addresses allowed) are eqctl's too, unless this shell
#      sets them;
#   4. a store.env that others could have written is refused, not read.
#   tests/run/eqctl_stack_test.sh   (ctest: run_eqctl)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lib.sh
source "$root/tests/run/lib.sh"
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-eqctl-stack-XXXXXX")"
trap 'rm -rf "$work"' EXIT
ctl="$root/scripts/eqctl"
# Only the stack folder speaks: nothing of the caller's environment.
unset EQ_DB_URL EQ_DB_PATH EQ_PORTAL_URL EQ_WEBHOOK_ALLOW_CIDRS EQ_ENV EQ_PORTAL_SIGNUP

# 1. Nothing there: exit 2, the path named, nothing created.
export EQ_VAR_DIR="$work/var"
rc=0
out="$("$ctl" key create --name nowhere 2>&1)" || rc=$?
[[ $rc -eq 2 ]] || fail "key create in an empty folder exited $rc, not 2: $out"
[[ "$out" == *"no database at sqlite:$work/var/eq.db"* ]] || fail "the message names no path: $out"
[[ "$out" == *EQ_VAR_DIR* && "$out" == *"eqctl migrate"* ]] || fail "the message says not how: $out"
[[ ! -e "$work/var" ]] || fail "eqctl made $(find "$work/var")"
# An empty file is no database either.
mkdir -m 700 "$work/var" && : >"$work/var/eq.db"
rc=0
out="$("$ctl" key list 2>&1)" || rc=$?
[[ $rc -eq 2 && "$out" == *"holds no EQ Reply tables"* ]] || fail "an empty file: exit $rc: $out"
rm "$work/var/eq.db"

# 2. migrate makes it; then the commands work.
"$ctl" migrate >/dev/null || fail "eqctl migrate failed"
[[ -s "$work/var/eq.db" ]] || fail "eqctl migrate made no database"
"$ctl" key create --name here --json >/dev/null || fail "key create after migrate failed"

# 3. The stack's settings, as scripts/run records them.
{
  printf 'EQ_DB_URL=%q\n' "sqlite:$work/var/eq.db"
  printf 'EQ_PORTAL_URL=%q\n' "http://portal.example:9999"
  printf 'EQ_WEBHOOK_ALLOW_CIDRS=%q\n' "127.0.0.0/8"
} >"$work/var/store.env"
link="$("$ctl" account invite ann@example.com --json | json link)"
[[ "$link" == http://portal.example:9999/* ]] || fail "the invitation does not use the stack's EQ_PORTAL_URL: $link"
"$ctl" key create --name hook --webhook-url http://127.0.0.1:9000/hook --json >/dev/null ||
  fail "the stack's EQ_WEBHOOK_ALLOW_CIDRS was not applied"
link="$(EQ_PORTAL_URL=http://mine.example "$ctl" account invite bob@example.com --json | json link)"
[[ "$link" == http://mine.example/* ]] || fail "this shell's EQ_PORTAL_URL does not win: $link"
# 4. A store.env that others could have written is not evaluated.
chmod 666 "$work/var/store.env"
rc=0
out="$("$ctl" key list 2>&1)" || rc=$?
[[ $rc -eq 2 && "$out" == *"not this user's alone"* ]] || fail "a store.env others can write was read: exit $rc: $out"
chmod 600 "$work/var/store.env"
echo "run_eqctl: scripts/eqctl finds the stack, shares its settings and never creates a database"
