#!/usr/bin/env bash
# Debian package dependencies of EQ Reply.
#
# Sourced by scripts/run and scripts/test (then call `eq_install_deps SET...`),
# executed by the Dockerfile's build stage:
#     bash scripts/lib/deps.sh install build|runtime|test|bench [...]
#
# Only missing packages are installed, so re-running on a provisioned machine
# costs a few dpkg-query calls and never touches the network.
#
# Safe under `set -euo pipefail`; does not change the caller's shell options.

EQ_DEPS_BUILD=(cmake ninja-build g++ pkg-config libuv1-dev rapidjson-dev libssl-dev
    libsqlite3-dev libpq-dev libboost-test-dev librabbitmq-dev libhttp-parser-dev libcurl4-openssl-dev)
EQ_DEPS_RUNTIME=(rabbitmq-server sqlite3 curl ca-certificates python3)
# prometheus: promtool checks our /metrics output and deploy/monitoring.
# chromium and a CJK font: the developer center's browser suite (its
# screenshots show Chinese text, not empty boxes).
# postgresql: the private server the store's PostgreSQL tests run against.
EQ_DEPS_TEST_ONLY=(docker-compose wrk nodejs npm prometheus chromium fonts-wqy-microhei postgresql)
# bench/run only: the Python peer (FastAPI on uvicorn, with uvloop and
# httptools as uvicorn picks them up when present, and Celery), nginx-light
# as the fixed-body reference, linux-perf to profile what a target misses.
EQ_DEPS_BENCH_ONLY=(python3-fastapi uvicorn python3-uvloop python3-httptools python3-celery
    nginx-light linux-perf)
# clang with libFuzzer and the sanitizer runtimes: scripts/fuzz and the
# sanitizer builds of scripts/test (issue 13).
EQ_DEPS_FUZZ=(clang libclang-rt-14-dev)
# The container's runtime stage, which needs neither compilers nor a broker:
# the shared libraries the binaries link, and sqlite3 for online backups of
# /data/eq.db (docs/operations.md, "Backing up the SQLite file").
EQ_DEPS_LIBS=(libstdc++6 libuv1 librabbitmq4 libsqlite3-0 libpq5 libcurl4 libssl3 libhttp-parser2.9 ca-certificates
    sqlite3)

# "apt-get update at most once": remembered for the whole process, so several
# eq_install_deps calls in one script do not refresh the lists repeatedly
# (kept if this file is sourced again).
_EQ_APT_UPDATED="${_EQ_APT_UPDATED:-0}"

_eq_deps_log() { printf 'deps: %s\n' "$*" >&2; }

# Prints the packages of the given sets, deduplicated, one per line.
_eq_deps_expand() {
    local set
    local -a pkgs=()
    for set in "$@"; do
        case "$set" in
            build) pkgs+=("${EQ_DEPS_BUILD[@]}") ;;
            runtime) pkgs+=("${EQ_DEPS_RUNTIME[@]}") ;;
            libs) pkgs+=("${EQ_DEPS_LIBS[@]}") ;;
            fuzz) pkgs+=("${EQ_DEPS_FUZZ[@]}" "${EQ_DEPS_BUILD[@]}") ;;
            test) pkgs+=("${EQ_DEPS_TEST_ONLY[@]}" "${EQ_DEPS_BUILD[@]}" "${EQ_DEPS_RUNTIME[@]}"
                  "${EQ_DEPS_FUZZ[@]}") ;;
            bench) pkgs+=("${EQ_DEPS_BENCH_ONLY[@]}") ;;
            postgres) pkgs+=(postgresql) ;;
            *)
                _eq_deps_log "unknown dependency set '$set' (expected build, runtime, libs, fuzz, test, bench or postgres)"
                return 2
                ;;
        esac
    done
    printf '%s\n' "${pkgs[@]}" | awk '!seen[$0]++'
}

# Names provided by installed packages (virtual packages). Needed because e.g.
# NodeSource's nodejs "Provides: npm" and "Conflicts: npm": asking apt for
# Debian's npm there would try to remove nodejs.
_eq_deps_provided() {
    dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
        awk -F'|' '$1 ~ /^ii/ && $2 != "" {
            n = split($2, a, ",")
            for (i = 1; i <= n; i++) {
                p = a[i]; sub(/\(.*/, "", p); gsub(/[[:space:]]/, "", p)
                if (p != "") print p
            }
        }' | sort -u
}

_eq_deps_installed() {
    local status
    status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" || return 1
    [[ "$status" == "install ok installed" ]]
}

# eq_install_deps SET... : installs the missing Debian packages of the sets
# (build, runtime, libs, fuzz, test, bench, postgres). Returns 1 (callers run with set -e, so they exit)
# when packages are missing and we are not root, or when apt fails.
eq_install_deps() {
    if [[ $# -eq 0 ]]; then
        _eq_deps_log "usage: eq_install_deps build|runtime|libs|fuzz|test|bench|postgres [...]"
        return 2
    fi
    local -a wanted=() missing=()
    local pkg provided=""
    # Validated up front: the process substitution below hides failures.
    _eq_deps_expand "$@" >/dev/null || return 2
    mapfile -t wanted < <(_eq_deps_expand "$@")

    _eq_deps_log "checking ${#wanted[@]} packages for set(s): $*"
    for pkg in "${wanted[@]}"; do
        _eq_deps_installed "$pkg" || missing+=("$pkg")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        # Only computed when needed: it lists the whole dpkg database.
        provided="$(_eq_deps_provided)"
        local -a still=()
        for pkg in "${missing[@]}"; do
            if grep -qxF -- "$pkg" <<<"$provided"; then
                _eq_deps_log "$pkg is provided by an installed package, skipping"
            else
                still+=("$pkg")
            fi
        done
        missing=("${still[@]+"${still[@]}"}")
    fi
    if [[ ${#missing[@]} -eq 0 ]]; then
        _eq_deps_log "all packages already installed"
        return 0
    fi

    if [[ "$(id -u)" -ne 0 ]]; then
        _eq_deps_log "missing Debian packages: ${missing[*]}"
        _eq_deps_log "not running as root: install them with"
        _eq_deps_log "  sudo apt-get install -y --no-install-recommends ${missing[*]}"
        return 1
    fi

    # Lock timeout: other tools may run apt at the same time; wait rather
    # than fail on the dpkg lock.
    local -a apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300)
    if [[ "$_EQ_APT_UPDATED" -eq 0 ]]; then
        _eq_deps_log "apt-get update"
        "${apt[@]}" update >&2 || {
            _eq_deps_log "apt-get update failed"
            return 1
        }
        _EQ_APT_UPDATED=1
    fi
    _eq_deps_log "installing: ${missing[*]}"
    "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2 || {
        _eq_deps_log "apt-get install failed for: ${missing[*]}"
        return 1
    }
    _eq_deps_log "installed ${#missing[@]} package(s)"
}

# Executed directly: `bash scripts/lib/deps.sh install SET...`.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    set -euo pipefail
    if [[ $# -lt 2 || "$1" != "install" ]]; then
        echo "usage: $0 install build|runtime|test|bench [...]" >&2
        exit 2
    fi
    shift
    eq_install_deps "$@"
fi
