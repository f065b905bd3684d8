#!/usr/bin/env bash
# The key and webhook-secret rotation of docs/operations.md ("Key rotation")
# runs as written (issue 28): the block after the `rotation-block` marker is
# run from the repository's root against a fresh stack folder (EQ_VAR_DIR)
# holding one key, KEY_ID replaced by that key's id. Afterwards the old key
# is revoked and was rotated to a new active key of the same account, and
# the account has a new webhook secret with the first one in its overlap.
#   tests/run/rotation_doc_test.sh   (ctest: docs_rotation)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lib.sh
source "$root/tests/run/lib.sh"
doc="$root/docs/operations.md"
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-rotation-doc-XXXXXX")"
trap 'rm -rf "$work"' EXIT

block="$(doc_block rotation-block "$doc")"
[[ -n "$block" ]] || fail "no rotation block after the rotation-block marker in $doc"

export EQ_VAR_DIR="$work/var"
# Only the stack folder speaks: nothing of the caller's environment.
unset EQ_DB_URL EQ_DB_PATH EQ_PORTAL_URL EQ_WEBHOOK_ALLOW_CIDRS EQ_ENV EQ_PORTAL_SIGNUP
cd "$root"
scripts/eqctl migrate >/dev/null  # a fresh stack folder: its database
created="$(scripts/eqctl key create --name rotation-doc --json)"
key_id="$(json key_id <<<"$created")"
first_secret="$(json webhook_secret <<<"$created")"
account="$(scripts/eqctl key show "$key_id" --json | json account_id)"

out="$(bash -euo pipefail -c "${block//KEY_ID/$key_id}" 2>&1)" || fail "the documented commands failed:
${block//KEY_ID/$key_id}
--- output:
$out"

old="$(scripts/eqctl key show "$key_id" --json)"
[[ "$(json status <<<"$old")" == revoked ]] || fail "the old key is not revoked: $old"
new_id="$(json rotated_to <<<"$old")"
[[ -n "$new_id" ]] || fail "the old key names no key that replaced it: $old"
new="$(scripts/eqctl key show "$new_id" --json)"
[[ "$(json status <<<"$new")" == active ]] || fail "the new key is not active: $new"
[[ "$(json account_id <<<"$new")" == "$account" ]] || fail "the new key is another account's"
secrets="$(scripts/eqctl webhook-secret show "$account" --json)"
[[ "$(json previous_secret <<<"$secrets")" == "$first_secret" ]] ||
  fail "the first webhook secret is not in its overlap: $secrets"
[[ "$(json secret <<<"$secrets")" != "$first_secret" ]] || fail "the webhook secret did not change"
echo "rotation_doc_test: ok (key $key_id -> $new_id, secret rotated)"
