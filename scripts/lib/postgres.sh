#!/usr/bin/env bash
# Private PostgreSQL server per VAR_DIR, for scripts/run and scripts/test.
#
#   eq_postgres_start VAR_DIR   initialize (first time) and start the server;
#                               writes VAR_DIR/postgres/postgres.env (mode 600)
#                               with EQ_PG_URL and prints it to stdout
#   eq_postgres_stop  VAR_DIR   stop it (idempotent)
#   eq_postgres_psql  VAR_DIR ARGS...
#                               psql ARGS against its database, as role eq
#
# The server runs from Debian's packages (the newest /usr/lib/postgresql/N),
# with every file under VAR_DIR/postgres: data directory, socket and log.
# It listens on 127.0.0.1 only, on a port chosen free (EQ_PG_PORT asks for
# one), so it never meets the distribution's own cluster or another stack.
# When started by root it runs as the package's unprivileged `postgres`
# user (PostgreSQL refuses to run as root), which then owns VAR_DIR/postgres.
# The database `eq` belongs to the role `eq`, whose password is
# EQ_PG_PASSWORD or chosen at random at the first start and kept in
# postgres.env; connections need it (scram-sha-256), also on the socket.
#
# EQ_PG_SERVER_OPTIONS adds server settings to a start, as postgres reads
# them on its command line (`-c name=value ...`); bench/run's profile uses
# it to load pg_stat_statements.
#
# Written for callers running `set -euo pipefail`; nothing here changes the
# caller's shell options. Progress goes to stderr.

EQ_PG_START_TIMEOUT="${EQ_PG_START_TIMEOUT:-60}"

_eq_pg_log() { printf 'postgres: %s\n' "$*" >&2; }

# The directory of the newest installed server's binaries.
_eq_pg_bindir() {
    local dir
    dir="$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null |
        sort -V | tail -n1)"
    [[ -n "$dir" && -x "$dir/pg_ctl" ]] || return 1
    printf '%s\n' "$dir"
}

# Runs a command as the server's user: `postgres` when we are root, else
# ourselves.
_eq_pg_as() {
    if [[ "$(id -u)" -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A port free on 127.0.0.1: the one asked for when it can be bound, else
# one the kernel picks. Probed with SO_REUSEADDR, as the server binds: a
# server just stopped leaves its clients' connections in TIME_WAIT on its
# port, which would otherwise look taken, and a restart would move.
_eq_pg_pick_port() {
    python3 - "${1:-0}" <<'PY'
import socket, sys
want = int(sys.argv[1])
for port in ([want] if want > 0 else []) + [0]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    print(s.getsockname()[1])
    s.close()
    break
PY
}

eq_postgres_start() {
    local var bin pgdir data port password env
    var="$(realpath -m -- "$1")"
    pgdir="$var/postgres"
    data="$pgdir/data"
    env="$pgdir/postgres.env"
    bin="$(_eq_pg_bindir)" || {
        _eq_pg_log "no PostgreSQL server under /usr/lib/postgresql (install Debian's postgresql)"
        return 1
    }
    mkdir -p "$pgdir/run"
    if [[ "$(id -u)" -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || {
            _eq_pg_log "running as root needs the 'postgres' user (Debian's postgresql creates it)"
            return 1
        }
        # The server's user must reach its files through VAR_DIR.
        chmod o+x "$var"
        chown -R postgres: "$pgdir"
    fi
    chmod 700 "$pgdir"
    if [[ -f "$env" ]]; then
        # shellcheck disable=SC1090
        password="$(. "$env" && printf '%s' "$EQ_PG_PASSWORD")"
    else
        password="${EQ_PG_PASSWORD:-$(head -c 24 /dev/urandom | base64 | tr -d '/+=')}"
    fi
    if [[ ! -f "$data/PG_VERSION" ]]; then
        _eq_pg_log "initializing $data"
        local pwfile="$pgdir/initpw"
        (umask 077 && printf '%s\n' "$password" >"$pwfile")
        [[ "$(id -u)" -ne 0 ]] || chown postgres: "$pwfile"
        _eq_pg_as "$bin/initdb" -D "$data" -U eq --pwfile="$pwfile" -A scram-sha-256 \
            -E UTF8 --locale=C.UTF-8 >"$pgdir/initdb.log" 2>&1 || {
            rm -f "$pwfile"
            _eq_pg_log "initdb failed:"
            tail -n 20 "$pgdir/initdb.log" >&2
            return 1
        }
        rm -f "$pwfile"
    fi
    if _eq_pg_as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        port="$(cat "$pgdir/port")"
        _eq_pg_log "already running on port $port"
    else
        # The port of the last start when it is still free, so that a
        # restarted stack keeps its URL.
        port="$(_eq_pg_pick_port "${EQ_PG_PORT:-$(cat "$pgdir/port" 2>/dev/null || echo 0)}")"
        [[ -n "$port" ]] || { _eq_pg_log "could not choose a port"; return 1; }
        printf '%s\n' "$port" >"$pgdir/port"
        _eq_pg_log "starting on 127.0.0.1:$port"
        _eq_pg_as "$bin/pg_ctl" -D "$data" -l "$pgdir/server.log" -w -t "$EQ_PG_START_TIMEOUT" \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$pgdir/run ${EQ_PG_SERVER_OPTIONS:-}" \
            start >/dev/null || {
            _eq_pg_log "the server did not start:"
            tail -n 20 "$pgdir/server.log" >&2
            return 1
        }
    fi
    local exists url
    exists="$(PGPASSWORD="$password" "$bin/psql" -h 127.0.0.1 -p "$port" -U eq -d postgres -qAt \
        -c "SELECT 1 FROM pg_database WHERE datname = 'eq'")"
    if [[ "$exists" != 1 ]]; then
        PGPASSWORD="$password" "$bin/createdb" -h 127.0.0.1 -p "$port" -U eq eq
    fi
    # The password percent-encoded in the URL, and quoted in the file that
    # callers source: an EQ_PG_PASSWORD may hold any character.
    url="postgresql://eq:$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$password")@127.0.0.1:$port/eq"
    (umask 077 && {
        printf 'EQ_PG_BIN=%q\n' "$bin"
        printf 'EQ_PG_PORT=%q\n' "$port"
        printf 'EQ_PG_PASSWORD=%q\n' "$password"
        printf 'EQ_PG_URL=%q\n' "$url"
    } >"$env")
    [[ "$(id -u)" -ne 0 ]] || chown root: "$env"
    printf 'EQ_PG_URL=%s\n' "$url"
}

eq_postgres_stop() {
    local var bin data
    var="$(realpath -m -- "$1")"
    data="$var/postgres/data"
    [[ -f "$data/PG_VERSION" ]] || return 0
    bin="$(_eq_pg_bindir)" || return 0
    if _eq_pg_as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
        _eq_pg_log "stopping"
        _eq_pg_as "$bin/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null || true
    fi
}

eq_postgres_psql() {
    local var="$1"
    shift
    local env
    env="$(realpath -m -- "$var")/postgres/postgres.env"
    [[ -f "$env" ]] || { _eq_pg_log "no server started in $var"; return 1; }
    (
        # shellcheck disable=SC1090
        . "$env"
        PGPASSWORD="$EQ_PG_PASSWORD" "$EQ_PG_BIN/psql" -h 127.0.0.1 -p "$EQ_PG_PORT" -U eq -d eq "$@"
    )
}
