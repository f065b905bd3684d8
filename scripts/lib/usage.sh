# eq_help_if_asked SCRIPT ARGS...: with --help or -h among ARGS, prints
# SCRIPT's usage (its header comment, the lines after the #! line) and
# exits 0 before the script does anything: no install, no build, no broker,
# no database. Sourced by scripts/run, test, build and fuzz, bench/run and
# .ci/run, each before it changes directory (scripts/eqctl hands --help to
# eqctl, which answers it without a database).
eq_help_if_asked() {
  local script="$1" arg
  shift
  for arg in "$@"; do
    if [[ "$arg" == --help || "$arg" == -h ]]; then
      printf 'usage: %s [--help]\n\n' "$script"
      awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$script"
      exit 0
    fi
  done
}
