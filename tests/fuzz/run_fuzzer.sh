#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its seed corpus.
#   run_fuzzer.sh BINARY SEED_DIR SECONDS [libFuzzer flags...]
# New inputs go to $EQ_FUZZ_CORPUS when it is set (scripts/fuzz keeps one
# per target, so each run goes on from what the last one found), else to a
# scratch directory (libFuzzer writes into the first corpus directory it is
# given). A crashing input is kept in $EQ_FUZZ_ARTIFACTS (default: the
# scratch directory) and its path printed. The JSON targets get json.dict.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1" seeds="$2" seconds="$3"
shift 3
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-fuzz-XXXXXX")"
artifacts="${EQ_FUZZ_ARTIFACTS:-$work/artifacts}"
corpus="${EQ_FUZZ_CORPUS:-$work/corpus}"
mkdir -p "$corpus" "$artifacts"
dict=()
case "$(basename "$bin")" in
  fuzz_request_json | fuzz_messages) dict=(-dict="$here/json.dict") ;;
esac
rc=0
# -rss_limit_mb bounds a leak; -timeout flags one input that takes over 10 s.
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${dict[@]}" "$@" "$corpus" "$seeds" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "run_fuzzer: $(basename "$bin") failed (exit $rc); inputs kept in $artifacts" >&2
  ls -l "$artifacts" >&2 || true
else
  rm -rf "$work"
fi
exit $rc
