#!/usr/bin/env bash
# Every script answers --help (and -h) with its usage and exit 0, before it
# installs, builds or starts anything (issue 28, item 6): scripts/run,
# scripts/test, scripts/build, scripts/fuzz, scripts/eqctl, bench/run and
# .ci/run, each with an EQ_VAR_DIR that must not appear and a PATH without
# apt-get (an install attempt fails), and within seconds. The binaries'
# own --help is tests/integration/help_test.cc's.
#   tests/run/script_help_test.sh   (ctest: scripts_help)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lib.sh
source "$root/tests/run/lib.sh"
work="$(mktemp -d "${TMPDIR:-/tmp}/eq-script-help-XXXXXX")"
trap 'rm -rf "$work"' EXIT
# A PATH with the usual tools but no apt-get, dpkg or cmake: a script that
# tried to install or build would fail here instead of passing slowly.
mkdir "$work/bin"
for tool in bash env awk sed grep cat dirname basename realpath mkdir printf head tail tr; do
  found="$(command -v "$tool")" && ln -s "$found" "$work/bin/$tool"
done
for script in scripts/run scripts/test scripts/build scripts/fuzz scripts/eqctl bench/run .ci/run; do
  for flag in --help -h; do
    rc=0
    out="$(cd "$work" && EQ_VAR_DIR="$work/var" EQ_BUILD_DIR="${EQ_BUILD_DIR:-$root/build}" \
      PATH="$work/bin" "$(command -v timeout)" 20 "$root/$script" "$flag" 2>&1)" || rc=$?
    [[ $rc -eq 0 ]] || fail "$script $flag exited $rc: $out"
    [[ "$out" == usage:* ]] || fail "$script $flag does not start with its usage: $out"
    [[ $(wc -l <<<"$out") -ge 3 ]] || fail "$script $flag says too little: $out"
    [[ ! -e "$work/var" ]] || fail "$script $flag made $work/var"
  done
done
echo "scripts_help: every script answers --help and -h with its usage, touching nothing"
