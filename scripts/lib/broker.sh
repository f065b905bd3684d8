#!/usr/bin/env bash
# Private RabbitMQ node per VAR_DIR, for scripts/run and scripts/test.
#
#   eq_broker_start VAR_DIR        start (or reuse) the node, export EQ_* vars
#   eq_broker_stop  VAR_DIR        stop it (idempotent)
#   eq_broker_ctl   VAR_DIR ARGS   rabbitmqctl ARGS against it
#   eq_broker_cluster_start DIR N  N nodes in DIR/node1..N joined in one cluster;
#                                  writes DIR/cluster.env (EQ_AMQP_URL lists them all)
#   eq_broker_cluster_stop  DIR    stops every node of that cluster
#
# Users: the administrator EQ_AMQP_USER (default eq, password
# EQ_AMQP_PASSWORD) for operators and tests, and one user per role, eq-api,
# eq-worker and eq-dispatcher, with the least permissions and the topology
# of deploy/rabbitmq/definitions.sh. Their passwords come from
# EQ_AMQP_{API,WORKER,DISPATCHER}_PASSWORD or are chosen at random at the
# node's first start; broker.env (mode 600) keeps them and gives each role's
# URL as EQ_AMQP_{API,WORKER,DISPATCHER}_URL.
#
# The system's default node (rabbit@HOST, port 5672, epmd 4369) is never
# touched: every file lives under VAR_DIR/rabbitmq, the node name is derived
# from VAR_DIR, and epmd/distribution use private ports, so several stacks and
# the distribution's own service can run side by side.
#
# Written for callers running `set -euo pipefail`; nothing here changes the
# caller's shell options. Progress goes to stderr, the final KEY=value lines
# of eq_broker_start to stdout.

# The /usr/sbin wrappers of the Debian package are unusable here: they cd to
# /var/lib/rabbitmq, redirect the server output to /var/log/rabbitmq and
# re-run everything through `su` (which resets HOME, hence the cookie).
EQ_RABBITMQ_BIN="${EQ_RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}"
EQ_BROKER_START_TIMEOUT="${EQ_BROKER_START_TIMEOUT:-60}"
EQ_BROKER_STOP_TIMEOUT="${EQ_BROKER_STOP_TIMEOUT:-20}"
# How old, at most, the queue counts are that the management API, its
# dashboard and the per-queue Prometheus metrics show, in whole seconds.
# RabbitMQ's default is 5 s, from three settings in a row: queues and
# channels emit statistics every collect_statistics_interval, quorum queues
# (the job queues) on their tick, rabbit's quorum_tick_interval (an
# advanced.config setting; rabbitmq.conf has no key for it), and the
# management agent collects what was emitted at the finest step of its
# sample_retention_policies. Unset keeps those defaults; the tests set 1, so
# that a test waiting for a queue's counts waits about 1 s, not 5 to 10.
EQ_BROKER_STATS_SECONDS="${EQ_BROKER_STATS_SECONDS:-}"
# One lock for all stacks on the machine: ports are chosen free and only bound
# by the node seconds later, so two concurrent starts would pick the same
# ones. The lock is held from the port choice until the listeners are up.
EQ_BROKER_LOCK_FILE="${EQ_BROKER_LOCK_FILE:-${TMPDIR:-/tmp}/eq-broker.lock}"

_eq_broker_log() { printf 'broker: %s\n' "$*" >&2; }

# Absolute path without requiring existence: the node name is a hash of it,
# so "var" and "./var" must give the same node.
_eq_broker_abs() { realpath -m -- "$1"; }

# Fills the array named $1 with the command prefix that runs a program as the
# node's user, EQB_RUN_AS: the package's `rabbitmq` user when started by root
# (files chowned to it), else empty for the current user, which works as well
# for a private node.
_eq_broker_as_prefix() {
    local -n _eqb_prefix="$1"
    if [[ -z "${EQB_RUN_AS:-}" || "$(id -u)" -ne 0 ]]; then
        _eqb_prefix=()
    elif command -v runuser >/dev/null 2>&1; then
        # -u, not -l: no login shell, rabbitmq's shell is nologin.
        _eqb_prefix=(runuser -u rabbitmq --)
    else
        # su needs an explicit shell for the same reason; "$0" "$@" avoids
        # re-quoting, and "--" stops su from parsing the command's options.
        # shellcheck disable=SC2016
        _eqb_prefix=(su -s /bin/sh -c 'exec "$0" "$@"' -- rabbitmq)
    fi
}

# Loads VAR_DIR/rabbitmq/node.env into the caller's (local) EQB_* variables.
# Returns 1 if the broker was never started there.
_eq_broker_load() {
    local state="$1/rabbitmq/node.env"
    [[ -f "$state" ]] || return 1
    # shellcheck disable=SC1090
    source "$state"
    # node.env written before EQB_RUN_AS existed: the node user owns the dir.
    if ! grep -q '^EQB_RUN_AS=' "$state" && [[ "$(stat -c %U "$1/rabbitmq")" == rabbitmq ]]; then
        EQB_RUN_AS=rabbitmq
    fi
}

# Prints the environment (NAME=value, one per line) shared by the server and
# the CLI tools, from the EQB_* variables of the caller. Both sides must agree
# on node name, epmd port and HOME (cookie) or the CLI cannot reach the node.
_eq_broker_envlist() {
    local d="$EQB_DIR"
    printf '%s\n' \
        "HOME=$d" \
        "LANG=C.UTF-8" \
        "LC_ALL=C.UTF-8" \
        "RABBITMQ_NODENAME=$EQB_NODENAME" \
        "RABBITMQ_CONF_ENV_FILE=$d/rabbitmq-env.conf" \
        "RABBITMQ_CONFIG_FILE=$d/rabbitmq.conf" \
        "RABBITMQ_CONFIG_FILES=$d/conf.d/*.conf" \
        "RABBITMQ_ADVANCED_CONFIG_FILE=$d/advanced.config" \
        "RABBITMQ_MNESIA_BASE=$d/mnesia" \
        "RABBITMQ_LOG_BASE=$d/log" \
        "RABBITMQ_PID_FILE=$d/rabbitmq.pid" \
        "RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins" \
        "RABBITMQ_PLUGINS_EXPAND_DIR=$d/plugins-expand" \
        "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1" \
        "RABBITMQ_NODE_PORT=$EQB_AMQP_PORT" \
        "RABBITMQ_DIST_PORT=$EQB_DIST_PORT" \
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}" \
        "ERL_EPMD_PORT=$EQB_EPMD_PORT" \
        "ERL_EPMD_ADDRESS=127.0.0.1" \
        "ERL_CRASH_DUMP=$d/log/erl_crash.dump"
}

# Fills the array named $1 with the full command running RabbitMQ tool $2
# (rabbitmqctl, rabbitmq-server, ...) with arguments $3... as the node user
# and with the node's environment. Needs EQB_* loaded.
_eq_broker_cmd() {
    local -n _eqb_cmd="$1"
    local tool="$2"
    shift 2
    local -a prefix envs
    _eq_broker_as_prefix prefix
    mapfile -t envs < <(_eq_broker_envlist)
    _eqb_cmd=("${prefix[@]+"${prefix[@]}"}" env "${envs[@]}" "$EQ_RABBITMQ_BIN/$tool" "$@")
}

# Runs RabbitMQ tool TOOL with ARGS against the node, optionally bounded.
#   _eq_broker_tool [--timeout SECONDS] TOOL ARGS...
_eq_broker_tool() {
    local -a wrap=() cmd
    if [[ "${1:-}" == --timeout ]]; then
        wrap=(timeout "$2")
        shift 2
    fi
    _eq_broker_cmd cmd "$@"
    (
        # cd: the node user may not be able to read the caller's cwd (e.g.
        # /root), which upsets erl.
        cd "$EQB_DIR" || exit 1
        # The start lock must not leak into children (an epmd started by
        # one would hold it for its lifetime).
        if [[ -n "${_EQB_LOCK_FD:-}" ]]; then exec {_EQB_LOCK_FD}>&-; fi
        exec "${wrap[@]+"${wrap[@]}"}" "${cmd[@]}"
    )
}

# True if process $1 was started for this node: the node name is in its
# arguments (runuser/su/env) or its environment (non-root start).
_eq_broker_is_ours() {
    grep -qaF "RABBITMQ_NODENAME=$EQB_NODENAME" "/proc/$1/cmdline" "/proc/$1/environ" 2>/dev/null
}

# Pids of the processes in the node's session (runuser, the rabbitmq-server
# script, beam.smp, erl_child_setup, inet_gethost; not epmd, which detaches).
# Read from /proc: procps is not installed on slim images.
_eq_broker_session_pids() {
    local launcher="$1" f rest pid ppid sid
    local -A sids=()
    [[ "$launcher" =~ ^[0-9]+$ ]] || return 0
    [[ -d "/proc/$launcher" ]] || return 0
    # The pid comes from a file and may have been reused since (reboot):
    # only trust a session leader that carries this node's name.
    _eq_broker_is_ours "$launcher" && sids[$launcher]=1
    # With job control (set -m) setsid has to fork: the session is then led
    # by a child of the launcher.
    for f in /proc/[0-9]*/stat; do
        { read -r rest <"$f"; } 2>/dev/null || continue
        rest="${rest##*) }"
        read -r _ ppid _ sid _ <<<"$rest"
        pid="${f#/proc/}"
        pid="${pid%/stat}"
        if [[ "$ppid" == "$launcher" && "$sid" == "$pid" ]] && _eq_broker_is_ours "$pid"; then
            sids[$pid]=1
        fi
    done
    for f in /proc/[0-9]*/stat; do
        { read -r rest <"$f"; } 2>/dev/null || continue
        rest="${rest##*) }"
        read -r _ _ _ sid _ <<<"$rest"
        pid="${f#/proc/}"
        pid="${pid%/stat}"
        if [[ -n "${sids[$sid]:-}" ]]; then printf '%s\n' "$pid"; fi
    done
}

# Pid of the node's beam.smp from its pid file, if that process is alive.
_eq_broker_beam_pid() {
    local pid
    pid="$(cat "$EQB_DIR/rabbitmq.pid" 2>/dev/null || true)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    # The comm check guards against pid reuse after a reboot or crash.
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == beam.smp ]] || return 1
    printf '%s\n' "$pid"
}

_eq_broker_port_open() {
    # bash's /dev/tcp: no dependency, and timeout bounds a filtered port.
    # shellcheck disable=SC2016
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# Picks one port per argument: the requested one if it can be bound on
# 127.0.0.1, else a free one chosen by the kernel (0 = any). All sockets stay
# open until every port is chosen so the answers are distinct. Skips the
# 35672-35682 range, which the rabbitmqctl CLI uses for its own distribution.
_eq_broker_pick_ports() {
    python3 - "$@" <<'PY'
import socket, sys
held, out = [], []
def grab(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    held.append(s)
    return s.getsockname()[1]
for arg in sys.argv[1:]:
    want = int(arg)
    got = grab(want) if want > 0 else None
    while got is None or 35672 <= got <= 35682:
        got = grab(0)
    out.append(str(got))
print(" ".join(out))
PY
}

# Stops an epmd listening on PORT, if any. Only for the private ports this
# file chose, never 4369.
_eq_broker_kill_epmd() {
    local port="$1" pid
    [[ -n "$port" && "$port" != 4369 ]] || return 0
    _eq_broker_port_open "$port" || return 0
    ERL_EPMD_PORT="$port" epmd -port "$port" -kill >/dev/null 2>&1 || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        _eq_broker_port_open "$port" || return 0
        sleep 0.2
    done
    # epmd refuses -kill while a node is still registered (e.g. a node we had
    # to SIGKILL): find the listener and kill it if it is an epmd.
    pid="$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2 || true)"
    if [[ -n "$pid" && "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == epmd ]]; then
        kill "$pid" 2>/dev/null || true
    fi
}

_eq_broker_print_logs() {
    local var_dir="$1" f
    for f in "$var_dir/log/rabbitmq.out" "$var_dir/rabbitmq/log/"*.log; do
        [[ -f "$f" ]] || continue
        _eq_broker_log "---- tail of $f ----"
        tail -n 40 "$f" >&2 || true
    done
}

# Exports EQ_* from VAR_DIR/broker.env and prints them.
_eq_broker_publish() {
    local var_dir="$1" line
    # shellcheck disable=SC1091
    source "$var_dir/broker.env"
    while IFS= read -r line; do
        if [[ "$line" == export\ * ]]; then printf '%s\n' "${line#export }"; fi
    done <"$var_dir/broker.env"
}

# The settings of EQ_BROKER_STATS_SECONDS, appended to DIR/rabbitmq.conf,
# and DIR/advanced.config. The retention policies keep RabbitMQ's history
# (an hour, a day) at its coarser steps; only the first step is finer.
_eq_broker_stats_config() {
    local d="$1" s="$EQ_BROKER_STATS_SECONDS"
    [[ "$s" =~ ^[1-9][0-9]*$ ]] || {
        _eq_broker_log "EQ_BROKER_STATS_SECONDS must be a whole number of seconds, not '$s'"
        return 1
    }
    cat >>"$d/rabbitmq.conf" <<EOF || return 1
collect_statistics_interval = $((s * 1000))
management.sample_retention_policies.global.minute = $s
management.sample_retention_policies.global.hour = 60
management.sample_retention_policies.global.day = 1200
management.sample_retention_policies.basic.minute = $s
management.sample_retention_policies.basic.hour = 60
management.sample_retention_policies.detailed.10 = $s
EOF
    printf '[{rabbit, [{quorum_tick_interval, %s}]}].\n' "$((s * 1000))" >"$d/advanced.config"
}

eq_broker_start() {
    if [[ $# -ne 1 || -z "$1" ]]; then
        _eq_broker_log "usage: eq_broker_start VAR_DIR"
        return 2
    fi
    local var_dir
    var_dir="$(_eq_broker_abs "$1")"
    mkdir -p "$var_dir/log" "$(dirname "$EQ_BROKER_LOCK_FILE")"
    local _EQB_LOCK_FD rc=0
    # Opened read-only when it exists: flock does not need write access, and
    # another user's file in sticky /tmp can be neither appended to nor
    # O_CREAT-opened (fs.protected_regular).
    if [[ -e "$EQ_BROKER_LOCK_FILE" ]]; then
        exec {_EQB_LOCK_FD}<"$EQ_BROKER_LOCK_FILE"
    else
        exec {_EQB_LOCK_FD}>>"$EQ_BROKER_LOCK_FILE"
        chmod 644 "$EQ_BROKER_LOCK_FILE" 2>/dev/null || true
    fi
    if ! flock -w $((EQ_BROKER_START_TIMEOUT * 3)) "$_EQB_LOCK_FD"; then
        exec {_EQB_LOCK_FD}>&-
        _eq_broker_log "timed out waiting for $EQ_BROKER_LOCK_FILE (another broker start hung?)"
        return 1
    fi
    _eq_broker_start_locked "$var_dir" || rc=$?
    exec {_EQB_LOCK_FD}>&-
    if [[ $rc -eq 0 ]]; then
        _eq_broker_publish "$var_dir"
    fi
    return $rc
}

_eq_broker_start_locked() {
    local var_dir="$1"
    local EQB_DIR EQB_NODENAME EQB_AMQP_PORT EQB_MGMT_PORT EQB_PROM_PORT
    local EQB_DIST_PORT EQB_EPMD_PORT EQB_LAUNCHER_PID EQB_RUN_AS=""
    local user="${EQ_AMQP_USER:-eq}" pass="${EQ_AMQP_PASSWORD:-eq}"
    local pid t0=$SECONDS

    if _eq_broker_load "$var_dir"; then
        if pid="$(_eq_broker_beam_pid)" && [[ -f "$var_dir/broker.env" ]] &&
            _eq_broker_port_open "$EQB_AMQP_PORT"; then
            _eq_broker_log "node $EQB_NODENAME already running (pid $pid), reusing it"
            # The node, as the rabbitmq user, must still pass through
            # VAR_DIR (a caller may have tightened it since).
            if [[ "$EQB_RUN_AS" == rabbitmq && "$(id -u)" -eq 0 ]]; then
                chgrp rabbitmq "$var_dir" && chmod g+x,g-rw,o-rwx "$var_dir" || return 1
            fi
            return 0
        fi
        # Left over from a crash or a reboot: clear what may still hold the
        # old private epmd port before starting afresh.
        _eq_broker_log "stale broker state in $var_dir, cleaning up"
        eq_broker_stop "$var_dir" >/dev/null 2>&1 || true
    fi

    local d="$var_dir/rabbitmq"
    EQB_DIR="$d"
    EQB_NODENAME="eq-$(printf '%s' "$var_dir" | sha1sum | cut -c1-10)@localhost"
    local want_amqp="${EQ_AMQP_PORT:-5672}" want_mgmt="${EQ_RABBITMQ_MGMT_PORT:-15672}"
    local want_prom="${EQ_RABBITMQ_PROM_PORT:-15692}" p
    for p in "$want_amqp" "$want_mgmt" "$want_prom"; do
        if ! [[ "$p" =~ ^[0-9]+$ ]] || ((p > 65535)); then
            _eq_broker_log "invalid port '$p' in EQ_AMQP_PORT/EQ_RABBITMQ_MGMT_PORT/EQ_RABBITMQ_PROM_PORT"
            return 1
        fi
    done
    local ports
    ports="$(_eq_broker_pick_ports "$want_amqp" "$want_mgmt" "$want_prom" 0 0)" || {
        _eq_broker_log "could not choose ports (is python3 installed?)"
        return 1
    }
    read -r EQB_AMQP_PORT EQB_MGMT_PORT EQB_PROM_PORT EQB_DIST_PORT EQB_EPMD_PORT <<<"$ports"
    # The nodes of one cluster must find each other through one epmd
    # (eq_broker_cluster_start); then stopping one node leaves it running.
    local EQB_SHARED_EPMD=0
    if [[ -n "${EQ_BROKER_EPMD_PORT:-}" ]]; then
        EQB_EPMD_PORT="$EQ_BROKER_EPMD_PORT"
        EQB_SHARED_EPMD=1
    fi
    [[ "$EQB_AMQP_PORT" == "$want_amqp" ]] || _eq_broker_log "port $want_amqp taken, AMQP on $EQB_AMQP_PORT"
    [[ "$EQB_MGMT_PORT" == "$want_mgmt" ]] || _eq_broker_log "port $want_mgmt taken, management on $EQB_MGMT_PORT"
    [[ "$EQB_PROM_PORT" == "$want_prom" ]] || _eq_broker_log "port $want_prom taken, prometheus on $EQB_PROM_PORT"

    _eq_broker_log "preparing $d (node $EQB_NODENAME)"
    # Explicit `|| return 1` here and below: called from an `||` list, this
    # function runs with set -e suspended.
    mkdir -p "$d/log" "$d/mnesia" "$d/conf.d" || return 1
    rm -f "$var_dir/broker.env" "$d/rabbitmq.pid"
    # Empty on purpose: points the scripts away from /etc/rabbitmq/rabbitmq-env.conf,
    # whose NODENAME/ports would otherwise apply to this node too.
    printf '# private node of %s: settings come from the environment\n' "$var_dir" >"$d/rabbitmq-env.conf"
    printf '[rabbitmq_management,rabbitmq_prometheus].\n' >"$d/enabled_plugins"
    cat >"$d/rabbitmq.conf" <<EOF || return 1
# Generated by scripts/lib/broker.sh for $var_dir
listeners.tcp.default = 127.0.0.1:$EQB_AMQP_PORT
management.tcp.ip = 127.0.0.1
management.tcp.port = $EQB_MGMT_PORT
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = $EQB_PROM_PORT
# Creates/updates the EQ user at every boot, before the listeners open, so
# clients never see the node without it.
load_definitions = $d/definitions.json
log.file.level = info
EOF
    if [[ -n "$EQ_BROKER_STATS_SECONDS" ]]; then
        _eq_broker_stats_config "$d" || return 1
    else
        rm -f "$d/advanced.config"
    fi
    # python3 for correct JSON escaping of arbitrary passwords.
    (umask 077 && python3 -c '
import json, sys
u, p = sys.argv[1], sys.argv[2]
json.dump({
    "users": [{"name": u, "password": p, "tags": "administrator"}],
    "vhosts": [{"name": "/"}],
    "permissions": [{"user": u, "vhost": "/", "configure": ".*", "write": ".*", "read": ".*"}],
}, sys.stdout)' "$user" "$pass" >"$d/definitions.json") || return 1
    if [[ -n "${EQ_BROKER_COOKIE:-}" ]]; then
        # A cluster's nodes share one cookie.
        rm -f "$d/.erlang.cookie"
        (umask 077 && printf '%s' "$EQ_BROKER_COOKIE" >"$d/.erlang.cookie")
    elif [[ ! -s "$d/.erlang.cookie" ]]; then
        # od, not `tr </dev/urandom | head`: the latter dies of SIGPIPE under pipefail.
        (umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F >"$d/.erlang.cookie")
    fi
    # Erlang refuses a cookie readable by group/others.
    chmod 400 "$d/.erlang.cookie"
    if [[ "$(id -u)" -eq 0 ]]; then
        if ! id rabbitmq >/dev/null 2>&1; then
            _eq_broker_log "user 'rabbitmq' missing: install rabbitmq-server (scripts/lib/deps.sh install runtime)"
            return 1
        fi
        chown -R rabbitmq:rabbitmq "$d" || return 1
        # The node must pass through VAR_DIR to reach $d, but VAR_DIR also
        # holds the database and logs, which are for its owner only
        # (docs/operations.md, "Files and their modes"): the rabbitmq group
        # gets search (not listing) on VAR_DIR itself, others nothing.
        # Its parents are the caller's business.
        chgrp rabbitmq "$var_dir" || return 1
        chmod 0710 "$var_dir" || return 1
        if runuser -u rabbitmq -- test -w "$d/mnesia"; then
            EQB_RUN_AS=rabbitmq
        else
            # Better a node running as root than no node (e.g. VAR_DIR inside
            # a mktemp -d directory).
            _eq_broker_log "user rabbitmq cannot reach $d (a parent directory is not searchable): running the node as root"
            chown -R 0:0 "$d" || return 1
        fi
    fi

    printf '%s=%q\n' \
        EQB_DIR "$EQB_DIR" EQB_NODENAME "$EQB_NODENAME" \
        EQB_AMQP_PORT "$EQB_AMQP_PORT" EQB_MGMT_PORT "$EQB_MGMT_PORT" \
        EQB_PROM_PORT "$EQB_PROM_PORT" EQB_DIST_PORT "$EQB_DIST_PORT" \
        EQB_EPMD_PORT "$EQB_EPMD_PORT" EQB_RUN_AS "$EQB_RUN_AS" \
        EQB_SHARED_EPMD "$EQB_SHARED_EPMD" >"$d/node.env"

    _eq_broker_log "starting $EQB_NODENAME: amqp $EQB_AMQP_PORT, management $EQB_MGMT_PORT, prometheus $EQB_PROM_PORT, dist $EQB_DIST_PORT, epmd $EQB_EPMD_PORT"
    # setsid: own session, so a Ctrl-C aimed at the calling script does not
    # reach the node (the caller stops it with eq_broker_stop), and
    # eq_broker_stop can find every process of the node by session id even
    # before the pid file exists. Without job control setsid does not fork,
    # so $! is the session leader; it lives as long as the node, which lets
    # us notice a node dying during boot. The lock fd is closed or the node
    # would hold the lock for its lifetime.
    local -a cmd
    _eq_broker_cmd cmd rabbitmq-server
    (cd "$d" && exec setsid -w "${cmd[@]}") </dev/null >"$var_dir/log/rabbitmq.out" 2>&1 {_EQB_LOCK_FD}>&- &
    EQB_LAUNCHER_PID=$!
    printf '%s=%q\n' EQB_LAUNCHER_PID "$EQB_LAUNCHER_PID" >>"$d/node.env"

    if ! _eq_broker_wait_up "$var_dir"; then
        _eq_broker_print_logs "$var_dir"
        _eq_broker_log "startup failed, stopping what was started"
        eq_broker_stop "$var_dir" >/dev/null 2>&1 || true
        return 1
    fi
    if ! _eq_broker_ensure_user "$user" "$pass"; then
        _eq_broker_log "could not set up user $user"
        eq_broker_stop "$var_dir" >/dev/null 2>&1 || true
        return 1
    fi
    local api_pw worker_pw dispatcher_pw
    api_pw="${EQ_AMQP_API_PASSWORD:-$(_eq_broker_random)}"
    worker_pw="${EQ_AMQP_WORKER_PASSWORD:-$(_eq_broker_random)}"
    dispatcher_pw="${EQ_AMQP_DISPATCHER_PASSWORD:-$(_eq_broker_random)}"
    # A cluster's nodes get the roles and the topology once all have joined
    # (eq_broker_cluster_start): a quorum queue declared earlier would have
    # fewer replicas.
    if [[ -z "${EQ_BROKER_CLUSTER_NODE:-}" ]] &&
        ! _eq_broker_define "$api_pw" "$worker_pw" "$dispatcher_pw" classic; then
        eq_broker_stop "$var_dir" >/dev/null 2>&1 || true
        return 1
    fi
    pid="$(_eq_broker_beam_pid)"

    local url_user url_pass
    url_user="$(_eq_broker_urlencode "$user")"
    url_pass="$(_eq_broker_urlencode "$pass")"
    local at="@127.0.0.1:$EQB_AMQP_PORT/"
    # umask before the redirection: broker.env holds the passwords.
    (
        umask 077
        exec >"$var_dir/broker.env"
        printf '# Written by scripts/lib/broker.sh; source it to reach the broker of %s\n' "$var_dir"
        printf 'export %s=%q\n' \
            EQ_AMQP_PORT "$EQB_AMQP_PORT" \
            EQ_RABBITMQ_MGMT_PORT "$EQB_MGMT_PORT" \
            EQ_RABBITMQ_PROM_PORT "$EQB_PROM_PORT" \
            EQ_AMQP_URL "amqp://$url_user:$url_pass$at" \
            EQ_AMQP_API_PASSWORD "$api_pw" \
            EQ_AMQP_WORKER_PASSWORD "$worker_pw" \
            EQ_AMQP_DISPATCHER_PASSWORD "$dispatcher_pw" \
            EQ_AMQP_API_URL "amqp://eq-api:$api_pw$at" \
            EQ_AMQP_WORKER_URL "amqp://eq-worker:$worker_pw$at" \
            EQ_AMQP_DISPATCHER_URL "amqp://eq-dispatcher:$dispatcher_pw$at" \
            EQ_BROKER_PID "$pid"
    ) || return 1
    _eq_broker_log "node $EQB_NODENAME up in $((SECONDS - t0)) s (pid $pid)"
}

# 48 hex digits: safe in URLs and in definitions.sh's JSON.
_eq_broker_random() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Imports deploy/rabbitmq/definitions.sh (the role users, their permissions
# and the topology) into the node of the caller's EQB_*, then waits for the
# import, which the node runs asynchronously, to show.
#   _eq_broker_define API_PW WORKER_PW DISPATCHER_PW classic|quorum
_eq_broker_define() {
    local defs="${BASH_SOURCE[0]%/*}/../../deploy/rabbitmq/definitions.sh" i
    if ! EQ_AMQP_API_PASSWORD="$1" EQ_AMQP_WORKER_PASSWORD="$2" EQ_AMQP_DISPATCHER_PASSWORD="$3" \
        EQ_BROKER_SYNC_QUEUE_TYPE="$4" sh "$defs" |
        _eq_broker_tool --timeout 60 rabbitmqctl -q import_definitions --format json >/dev/null; then
        _eq_broker_log "could not import the role users and topology ($defs)"
        return 1
    fi
    # The last queue and the last user's permissions of the file.
    for ((i = 0; i < 100; i++)); do
        if _eq_broker_tool rabbitmqctl -q list_queues name 2>/dev/null | grep -qx eq.sync.analyze &&
            _eq_broker_tool rabbitmqctl -q list_user_permissions eq-dispatcher 2>/dev/null | grep -q '^/'; then
            return 0
        fi
        sleep 0.2
    done
    _eq_broker_log "the import of $defs did not show within 20 s"
    return 1
}

_eq_broker_urlencode() {
    python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"
}

# Waits until the node is booted and its three listeners accept connections.
# Needs EQB_* loaded.
_eq_broker_wait_up() {
    local var_dir="$1" deadline=$((SECONDS + EQ_BROKER_START_TIMEOUT)) port left
    # The CLI can only connect once the node has registered with epmd, which
    # happens around the time it writes its pid file: wait for that first,
    # cheaply, watching for an early death.
    until _eq_broker_beam_pid >/dev/null; do
        if ! kill -0 "$EQB_LAUNCHER_PID" 2>/dev/null; then
            _eq_broker_log "rabbitmq-server exited during startup"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            _eq_broker_log "timed out after ${EQ_BROKER_START_TIMEOUT}s waiting for $EQB_DIR/rabbitmq.pid"
            return 1
        fi
        sleep 0.2
    done
    while :; do
        left=$((deadline - SECONDS))
        ((left > 0)) || left=1
        if _eq_broker_tool rabbitmqctl -q await_startup --timeout "$left" >/dev/null 2>&1; then
            break
        fi
        if ! _eq_broker_beam_pid >/dev/null; then
            _eq_broker_log "node died during startup"
            return 1
        fi
        if ((SECONDS >= deadline)); then
            _eq_broker_log "timed out after ${EQ_BROKER_START_TIMEOUT}s waiting for the node to boot"
            return 1
        fi
        sleep 1
    done
    # await_startup returns once the boot steps ran; plugin listeners can
    # trail slightly behind.
    for port in "$EQB_AMQP_PORT" "$EQB_MGMT_PORT" "$EQB_PROM_PORT"; do
        until _eq_broker_port_open "$port"; do
            if ((SECONDS >= deadline)); then
                _eq_broker_log "timed out waiting for port $port to accept connections"
                return 1
            fi
            sleep 0.2
        done
    done
}

# The definitions loaded at boot normally created the user already; checking
# over HTTP is much cheaper than a rabbitmqctl call (~1-2 s of VM start each).
# Falls back to rabbitmqctl, e.g. if definitions were not applied.
_eq_broker_ensure_user() {
    local user="$1" pass="$2" body
    body="$(curl -fsS --max-time 5 -u "$user:$pass" \
        "http://127.0.0.1:$EQB_MGMT_PORT/api/permissions/%2F/$(_eq_broker_urlencode "$user")" 2>/dev/null || true)"
    if [[ "$body" == *'"configure":".*"'* && "$body" == *'"write":".*"'* && "$body" == *'"read":".*"'* ]]; then
        return 0
    fi
    _eq_broker_log "creating user $user with rabbitmqctl"
    _eq_broker_tool rabbitmqctl -q add_user "$user" "$pass" >/dev/null 2>&1 ||
        _eq_broker_tool rabbitmqctl -q change_password "$user" "$pass" >/dev/null || return 1
    _eq_broker_tool rabbitmqctl -q set_user_tags "$user" administrator >/dev/null || return 1
    _eq_broker_tool rabbitmqctl -q set_permissions -p / "$user" '.*' '.*' '.*' >/dev/null || return 1
}

eq_broker_stop() {
    if [[ $# -ne 1 || -z "$1" ]]; then
        _eq_broker_log "usage: eq_broker_stop VAR_DIR"
        return 2
    fi
    local var_dir
    var_dir="$(_eq_broker_abs "$1")"
    local EQB_DIR EQB_NODENAME EQB_AMQP_PORT EQB_MGMT_PORT EQB_PROM_PORT
    local EQB_DIST_PORT EQB_EPMD_PORT EQB_LAUNCHER_PID="" EQB_RUN_AS="" EQB_SHARED_EPMD=0 pid
    if ! _eq_broker_load "$var_dir"; then
        _eq_broker_log "no broker started in $var_dir, nothing to stop"
        return 0
    fi
    if pid="$(_eq_broker_beam_pid)"; then
        _eq_broker_log "stopping $EQB_NODENAME (pid $pid)"
        # Bounded: a wedged node must not hang the caller; the kill fallback
        # below handles it.
        local deadline=$((SECONDS + EQ_BROKER_STOP_TIMEOUT))
        _eq_broker_tool --timeout "$EQ_BROKER_STOP_TIMEOUT" rabbitmqctl -q stop >/dev/null 2>&1 || true
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            _eq_broker_log "node did not stop within ${EQ_BROKER_STOP_TIMEOUT}s"
        fi
    fi
    # Whatever is left of the node's session: a node that would not stop, or
    # one still booting (no pid file yet, e.g. a start interrupted by Ctrl-C).
    local -a left
    mapfile -t left < <(_eq_broker_session_pids "$EQB_LAUNCHER_PID")
    if [[ ${#left[@]} -gt 0 ]]; then
        _eq_broker_log "killing remaining node processes: ${left[*]}"
        kill -TERM "${left[@]}" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            mapfile -t left < <(_eq_broker_session_pids "$EQB_LAUNCHER_PID")
            [[ ${#left[@]} -gt 0 ]] || break
            sleep 0.5
        done
        if [[ ${#left[@]} -gt 0 ]]; then kill -KILL "${left[@]}" 2>/dev/null || true; fi
    fi
    # A cluster's shared epmd outlives each node (eq_broker_cluster_stop
    # stops it after the last one).
    if [[ "${EQB_SHARED_EPMD:-0}" != 1 ]]; then _eq_broker_kill_epmd "$EQB_EPMD_PORT"; fi
    rm -f "$var_dir/broker.env" "$EQB_DIR/rabbitmq.pid" "$EQB_DIR/node.env"
    _eq_broker_log "stopped $EQB_NODENAME"
}

eq_broker_ctl() {
    if [[ $# -lt 1 || -z "$1" ]]; then
        _eq_broker_log "usage: eq_broker_ctl VAR_DIR ARGS..."
        return 2
    fi
    local var_dir
    var_dir="$(_eq_broker_abs "$1")"
    shift
    local EQB_DIR EQB_NODENAME EQB_AMQP_PORT EQB_MGMT_PORT EQB_PROM_PORT
    local EQB_DIST_PORT EQB_EPMD_PORT EQB_LAUNCHER_PID EQB_RUN_AS=""
    if ! _eq_broker_load "$var_dir"; then
        _eq_broker_log "no broker started in $var_dir (run eq_broker_start first)"
        return 1
    fi
    _eq_broker_tool rabbitmqctl "$@"
}

# A RabbitMQ cluster of N private nodes (issue 13: a broker cluster), for
# tests and local trials: DIR/node1..N each a private node as above, sharing
# one epmd port and one cookie, nodes 2..N joined to node 1. Writes
# DIR/cluster.env: EQ_AMQP_URL with every node's address (comma-separated,
# as the processes accept it), EQ_CLUSTER_NODES (node names) and
# EQ_CLUSTER_DIRS (their VAR_DIRs, for eq_broker_ctl), EQ_RABBITMQ_MGMT_PORT
# of node 1.
eq_broker_cluster_start() {
    if [[ $# -ne 2 || -z "$1" || ! "$2" =~ ^[2-9]$ ]]; then
        _eq_broker_log "usage: eq_broker_cluster_start DIR N (N from 2 to 9)"
        return 2
    fi
    local dir n="$2" i epmd cookie urls="" nodes="" dirs="" mgmt="" first=""
    dir="$(_eq_broker_abs "$1")"
    mkdir -p "$dir"
    epmd="$(_eq_broker_pick_ports 0)" || return 1
    cookie="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)"
    local user="${EQ_AMQP_USER:-eq}" pass="${EQ_AMQP_PASSWORD:-eq}" role
    local -A role_pw=([api]="${EQ_AMQP_API_PASSWORD:-$(_eq_broker_random)}"
        [worker]="${EQ_AMQP_WORKER_PASSWORD:-$(_eq_broker_random)}"
        [dispatcher]="${EQ_AMQP_DISPATCHER_PASSWORD:-$(_eq_broker_random)}") role_urls=()
    for ((i = 1; i <= n; i++)); do
        # Free ports for every listener: several nodes on one host.
        EQ_BROKER_CLUSTER_NODE=1 EQ_BROKER_EPMD_PORT="$epmd" EQ_BROKER_COOKIE="$cookie" EQ_AMQP_PORT=0 \
            EQ_RABBITMQ_MGMT_PORT=0 EQ_RABBITMQ_PROM_PORT=0 \
            eq_broker_start "$dir/node$i" >/dev/null || return 1
        local EQB_NODENAME="" EQB_DIR="" EQB_RUN_AS="" EQB_AMQP_PORT="" EQB_MGMT_PORT=""
        _eq_broker_load "$dir/node$i" || return 1
        [[ -n "$first" ]] || { first="$EQB_NODENAME"; mgmt="$EQB_MGMT_PORT"; }
        urls+="${urls:+,}amqp://$(_eq_broker_urlencode "$user"):$(_eq_broker_urlencode "$pass")@127.0.0.1:$EQB_AMQP_PORT/"
        for role in api worker dispatcher; do
            role_urls[$role]+="${role_urls[$role]:+,}amqp://eq-$role:${role_pw[$role]}@127.0.0.1:$EQB_AMQP_PORT/"
        done
        nodes+="${nodes:+ }$EQB_NODENAME"
        dirs+="${dirs:+ }$dir/node$i"
        if ((i > 1)); then
            _eq_broker_log "joining $EQB_NODENAME to $first"
            eq_broker_ctl "$dir/node$i" -q stop_app >/dev/null &&
                eq_broker_ctl "$dir/node$i" -q reset >/dev/null &&
                eq_broker_ctl "$dir/node$i" -q join_cluster "$first" >/dev/null &&
                eq_broker_ctl "$dir/node$i" -q start_app >/dev/null || {
                _eq_broker_log "could not join $EQB_NODENAME to $first"
                return 1
            }
        fi
    done
    # Users and permissions are cluster-wide, and every quorum queue now
    # gets a replica on each node.
    (
        _eq_broker_load "$dir/node1" &&
            _eq_broker_define "${role_pw[api]}" "${role_pw[worker]}" "${role_pw[dispatcher]}" quorum
    ) || return 1
    (
        umask 077
        exec >"$dir/cluster.env"
        printf '# Written by scripts/lib/broker.sh: the cluster in %s\n' "$dir"
        printf 'export %s=%q\n' EQ_AMQP_URL "$urls" EQ_CLUSTER_NODES "$nodes" \
            EQ_CLUSTER_DIRS "$dirs" EQ_RABBITMQ_MGMT_PORT "$mgmt" EQ_CLUSTER_EPMD_PORT "$epmd" \
            EQ_AMQP_API_URL "${role_urls[api]}" EQ_AMQP_WORKER_URL "${role_urls[worker]}" \
            EQ_AMQP_DISPATCHER_URL "${role_urls[dispatcher]}"
    ) || return 1
    _eq_broker_log "cluster of $n nodes up: $nodes"
}

eq_broker_cluster_stop() {
    local dir d epmd=""
    dir="$(_eq_broker_abs "${1:?usage: eq_broker_cluster_stop DIR}")"
    for d in "$dir"/node*; do
        [[ -d "$d" ]] || continue
        if [[ -z "$epmd" && -f "$d/rabbitmq/node.env" ]]; then
            epmd="$(. "$d/rabbitmq/node.env" && printf '%s' "$EQB_EPMD_PORT")"
        fi
        eq_broker_stop "$d" >/dev/null 2>&1 || true
    done
    [[ -n "$epmd" ]] && _eq_broker_kill_epmd "$epmd"
    return 0
}
