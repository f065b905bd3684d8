#!/usr/bin/env bash
# The backup commands of docs/operations.md ("Backing up the SQLite file")
# run as written (issue 28, item 4): the block after the `backup-block`
# marker is run in a fresh folder whose var/eq.db is in WAL mode with a
# commit still only in its -wal file (a writer holds the database open, as
# eq-api does), and every copy it makes must hold that commit, be readable by
# its owner only, in a folder for its owner only.
#   tests/run/backup_doc_test.sh   (ctest: docs_backup)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lib.sh
source "$root/tests/run/lib.sh"
doc="$root/docs/operations.md"
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-backup-doc-XXXXXX")"
writer_pid=0
cleanup() {
  if [[ $writer_pid -gt 0 ]]; then kill "$writer_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

block="$(doc_block backup-block "$doc")"
[[ -n "$block" ]] || fail "no backup block after the backup-block marker in $doc"

cd "$work"
mkdir -m 700 var
# A writer that keeps the database open with automatic checkpoints off, so
# the row it commits lives only in eq.db-wal while the block runs.
python3 - <<'EOF' &
import sqlite3, time
db = sqlite3.connect("var/eq.db", isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("CREATE TABLE t (v TEXT)")
db.execute("INSERT INTO t VALUES ('in the wal')")
open("var/ready", "w").close()
time.sleep(120)
EOF
writer_pid=$!
for _ in $(seq 100); do [[ -e var/ready ]] && break; sleep 0.1; done
[[ -e var/ready ]] || fail "the writer did not start"
[[ -s var/eq.db-wal ]] || fail "the commit is not in the -wal file; the test proves nothing"

umask 022  # a loose umask: the block itself must keep the copies private
bash -euo pipefail -c "$block" || fail "the documented commands failed:
$block"

[[ "$(stat -c %a var/backup)" == 700 ]] || fail "var/backup is $(stat -c %a var/backup), not 700"
copies=(var/backup/*.db)
[[ ${#copies[@]} -eq 2 ]] || fail "expected 2 copies, found: ${copies[*]}"
for copy in "${copies[@]}"; do
  [[ "$(stat -c %a "$copy")" == 600 ]] || fail "$copy is $(stat -c %a "$copy"), not 600"
  got="$(sqlite3 "$copy" 'SELECT v FROM t')"
  [[ "$got" == "in the wal" ]] || fail "$copy lacks the commit of the -wal file (got '$got')"
done
echo "backup_doc_test: ok (${copies[*]})"
