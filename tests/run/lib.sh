# What the shell tests under tests/run/ share. Sourced, not run.

# fail MESSAGE...: says why on stderr and ends the test with status 1.
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# json FIELD: the field of the JSON object on stdin ("" for null).
json() {
  python3 -c 'import json, sys; v = json.load(sys.stdin)[sys.argv[1]]; print("" if v is None else v)' "$1"
}

# doc_block MARKER FILE: the first ```sh block after the line that starts
# with "<!-- MARKER" in FILE, without its fences: the commands a doc gives,
# for a test to run as written.
doc_block() {
  awk -v marker="<!-- $1" 'index($0, marker) == 1 { found = 1; next }
       found && /^```sh$/ { inside = 1; next }
       inside && /^```$/ { exit }
       inside { print }' "$2"
}
