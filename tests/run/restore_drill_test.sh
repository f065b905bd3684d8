#!/usr/bin/env bash
# The backup with eqctl and the restore drill of docs/operations.md
# ("Backing up the SQLite file") run as written (issue 28, item 4), from the
# repository's root on a stack folder of its own (EQ_VAR_DIR):
#   1. a key A; a writer holds the database open with a change (account A's
#      rate limit) still only in its -wal file, as eq-api would;
#   2. the block after the `eqctl-backup-block` marker makes the copy: 0600,
#      in a 0700 folder, holding that change;
#   3. a key B after the backup; the writer goes (the stack is stopped);
#   4. the block after the `restore-block` marker, BACKUP replaced by the
#      copy: key A is back with the change, key B is gone (it came after),
#      the replaced files are kept aside.
#   tests/run/restore_drill_test.sh   (ctest: docs_restore)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lib.sh
source "$root/tests/run/lib.sh"
doc="$root/docs/operations.md"
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-restore-drill-XXXXXX")"
writer_pid=0
cleanup() {
  if [[ $writer_pid -gt 0 ]]; then kill "$writer_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
backup_block="$(doc_block eqctl-backup-block "$doc")"
restore_block="$(doc_block restore-block "$doc")"
[[ -n "$backup_block" && -n "$restore_block" ]] || fail "no eqctl-backup-block or restore-block in $doc"

# The drill's paths are the repository's var/; here that is a folder of the
# test's own, reached through a copy of scripts/ next to it.
mkdir -p "$work/repo" && cp -r "$root/scripts" "$work/repo/"
export EQ_BUILD_DIR="${EQ_BUILD_DIR:-$root/build}"
unset EQ_VAR_DIR EQ_DB_URL EQ_DB_PATH EQ_PORTAL_URL EQ_WEBHOOK_ALLOW_CIDRS EQ_ENV EQ_PORTAL_SIGNUP
cd "$work/repo"

# 1. A key, and a change that lives only in the -wal file.
scripts/eqctl migrate >/dev/null
a="$(scripts/eqctl key create --name before --json | json key_id)"
account="$(scripts/eqctl key show "$a" --json | json account_id)"
python3 - "$account" <<'EOF' &
import sqlite3, sys, time
db = sqlite3.connect("var/eq.db", isolation_level=None)
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("UPDATE accounts SET rate_limit_per_min = 4242 WHERE id = ?", (sys.argv[1],))
open("var/writer-ready", "w").close()
time.sleep(120)
EOF
writer_pid=$!
for _ in $(seq 100); do [[ -e var/writer-ready ]] && break; sleep 0.1; done
[[ -e var/writer-ready ]] || fail "the writer did not start"
rm var/writer-ready
[[ -s var/eq.db-wal ]] || fail "the change is not in the -wal file; the drill proves less"

# 2. The backup, as written.
umask 022  # a loose umask: the block itself keeps the copy private
bash -euo pipefail -c "$backup_block" || fail "the backup commands failed:
$backup_block"
copies=(var/backup/*.db)
[[ ${#copies[@]} -eq 1 && -f "${copies[0]}" ]] || fail "expected one copy, found: ${copies[*]}"
copy="${copies[0]}"
[[ "$(stat -c %a var/backup)" == 700 ]] || fail "var/backup is $(stat -c %a var/backup), not 700"
[[ "$(stat -c %a "$copy")" == 600 ]] || fail "$copy is $(stat -c %a "$copy"), not 600"

# 3. Work after the backup; then the stack stops.
b="$(scripts/eqctl key create --name after --json | json key_id)"
kill "$writer_pid" && wait "$writer_pid" 2>/dev/null || true
writer_pid=0

# 4. The restore, as written.
out="$(bash -euo pipefail -c "${restore_block//BACKUP/$copy}" 2>&1)" || fail "the restore failed:
${restore_block//BACKUP/$copy}
--- output:
$out"
[[ "$out" == *"$a"* ]] || fail "key $a (before the backup) is not back: $out"
[[ "$out" != *"$b"* ]] || fail "key $b (after the backup) is still there: $out"
rate="$(scripts/eqctl key show "$a" --json | json rate_limit_per_min)"
[[ "$rate" == 4242 ]] || fail "the change that was only in the -wal file is not in the copy (rate $rate)"
[[ -e var/eq.db.before-restore ]] || fail "the replaced database was not kept aside"
[[ "$(stat -c %a var/eq.db)" == 600 ]] || fail "the restored file is $(stat -c %a var/eq.db), not 600"
echo "restore_drill_test: ok (backup $copy restored; key $a back, $b gone)"
