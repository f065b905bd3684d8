#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its seed corpus.
#   run_fuzzer.sh BINARY SEED_DIR SECONDS [libFuzzer flags...]
# New inputs go to a scratch directory (libFuzzer writes into the first
# corpus directory it is given); a crashing input is kept in
# $EQ_FUZZ_ARTIFACTS (default: the scratch directory) and its path printed.
set -euo pipefail
bin="$1" seeds="$2" seconds="$3"
shift 3
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-fuzz-XXXXXX")"
artifacts="${EQ_FUZZ_ARTIFACTS:-$work/artifacts}"
mkdir -p "$work/corpus" "$artifacts"
rc=0
# -rss_limit_mb bounds a leak; -timeout flags one input that takes over 10 s.
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "$@" "$work/corpus" "$seeds" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "run_fuzzer: $(basename "$bin") failed (exit $rc); inputs kept in $artifacts" >&2
  ls -l "$artifacts" >&2 || true
else
  rm -rf "$work"
fi
exit $rc
