# shellcheck shell=bash
# Throwaway local PostgreSQL cluster for development, tests and benchmarks.
# Source this file, then call upshift_provision_postgres; it exports DATABASE_URL.
set -euo pipefail

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

_upshift_pg_log() {
    printf 'postgres: %s\n' "$*" >&2
}

# A usable bin dir holds initdb, pg_ctl and postgres together (pg_ctl looks for
# postgres next to itself).
_upshift_pg_bindir_ok() {
    [[ -n "$1" && -x "$1/initdb" && -x "$1/pg_ctl" && -x "$1/postgres" ]]
}

# Sets UPSHIFT_PG_BINDIR. Debian keeps server binaries off PATH, in
# /usr/lib/postgresql/<major>/bin, so look there first (newest major wins).
_upshift_pg_find_bindir() {
    local d
    if [[ -d /usr/lib/postgresql ]]; then
        while IFS= read -r d; do
            if _upshift_pg_bindir_ok "/usr/lib/postgresql/$d/bin"; then
                UPSHIFT_PG_BINDIR="/usr/lib/postgresql/$d/bin"
                return 0
            fi
        done < <(ls -1 /usr/lib/postgresql | sort -rV)
    fi
    if command -v pg_config >/dev/null 2>&1; then
        d="$(pg_config --bindir 2>/dev/null || true)"
        if _upshift_pg_bindir_ok "$d"; then
            UPSHIFT_PG_BINDIR="$d"
            return 0
        fi
    fi
    if command -v pg_ctl >/dev/null 2>&1; then
        d="$(dirname "$(command -v pg_ctl)")"
        if _upshift_pg_bindir_ok "$d"; then
            UPSHIFT_PG_BINDIR="$d"
            return 0
        fi
    fi
    return 1
}

# Client tools: prefer the server's version, fall back to PATH.
_upshift_pg_tool() {
    if [[ -n "${UPSHIFT_PG_BINDIR:-}" && -x "$UPSHIFT_PG_BINDIR/$1" ]]; then
        printf '%s\n' "$UPSHIFT_PG_BINDIR/$1"
    elif command -v "$1" >/dev/null 2>&1; then
        command -v "$1"
    else
        upshift_die "postgres: '$1' not found (install postgresql-client)"
    fi
}

# Run a command as the cluster owner. initdb/pg_ctl refuse to run as root, so
# as root everything goes through runuser; cd / avoids "could not change
# directory" warnings when the caller's cwd is unreadable for that user.
upshift_run_as_cluster_user() {
    if [[ -n "${UPSHIFT_PG_USER:-}" && "$UPSHIFT_PG_USER" != "$(id -un)" ]]; then
        (cd / && runuser -u "$UPSHIFT_PG_USER" -- "$@")
    else
        "$@"
    fi
}

# The server's socket path must fit in sockaddr_un.sun_path (108 bytes incl. NUL).
_upshift_pg_socket_path_fits() {
    local sock="$1/sock/.s.PGSQL.65535"
    [[ ${#sock} -lt 108 ]]
}

# As root: make DIR exist, owned by postgres, and check postgres can really use it
# (chown may be refused, e.g. on some bind mounts).
_upshift_pg_prepare_dir_for_postgres() {
    local dir="$1"
    mkdir -p "$dir" 2>/dev/null || return 1
    chown postgres:postgres "$dir" 2>/dev/null || return 1
    chmod 700 "$dir"
    runuser -u postgres -- test -d "$dir" -a -w "$dir" -a -x "$dir" 2>/dev/null
}

# Sets UPSHIFT_PG_DIR (cluster folder) and UPSHIFT_PG_USER (cluster owner). The folder is .pg of the
# checkout, or UPSHIFT_PG_FOLDER (a path in the checkout, git-ignored) for a cluster of its own, as
# scripts/chaos keeps one that it may restart.
_upshift_pg_choose_dir() {
    local root local_dir fallback folder="${UPSHIFT_PG_FOLDER:-.pg}"
    root="$(upshift_root)"
    local_dir="$root/$folder"
    # Stable per checkout, so several worktrees get separate clusters (and each folder its own).
    if [[ "$folder" == .pg ]]; then
        fallback="/var/tmp/upshift-pg-$(printf '%s' "$root" | sha256sum | cut -c1-12)"
    else
        fallback="/var/tmp/upshift-pg-$(printf '%s' "$root/$folder" | sha256sum | cut -c1-12)"
    fi

    if [[ "$(id -u)" -ne 0 ]]; then
        UPSHIFT_PG_USER="$(id -un)"
        if _upshift_pg_socket_path_fits "$local_dir" && mkdir -p "$local_dir" 2>/dev/null && [[ -w "$local_dir" ]]; then
            UPSHIFT_PG_DIR="$local_dir"
        else
            mkdir -p "$fallback"
            [[ -O "$fallback" ]] || upshift_die "postgres: $fallback belongs to another user; remove it or set DATABASE_URL"
            UPSHIFT_PG_DIR="$fallback"
        fi
        return 0
    fi

    # Root: initdb refuses root, so the cluster is owned by and runs as postgres.
    id -u postgres >/dev/null 2>&1 ||
        upshift_die "postgres: running as root needs a 'postgres' user (apt-get install postgresql creates it)"
    command -v runuser >/dev/null 2>&1 || upshift_die "postgres: runuser (util-linux) is required when running as root"
    UPSHIFT_PG_USER=postgres
    if _upshift_pg_socket_path_fits "$local_dir" &&
        runuser -u postgres -- test -x "$root" 2>/dev/null &&
        _upshift_pg_prepare_dir_for_postgres "$local_dir"; then
        UPSHIFT_PG_DIR="$local_dir"
    else
        # Checkout not reachable by postgres (e.g. under /root): keep the tree clean.
        rmdir "$local_dir" 2>/dev/null || true
        _upshift_pg_prepare_dir_for_postgres "$fallback" ||
            upshift_die "postgres: cannot prepare $fallback for the postgres user"
        UPSHIFT_PG_DIR="$fallback"
    fi
}

_upshift_pg_running() {
    upshift_run_as_cluster_user "$UPSHIFT_PG_BINDIR/pg_ctl" -D "$UPSHIFT_PG_DIR/data" status >/dev/null 2>&1
}

# True when nothing listens on 127.0.0.1:PORT (or any address on that port), and no connection uses it
# (one in TIME_WAIT does not stop PostgreSQL's bind: a cluster keeps its port across a restart).
_upshift_pg_port_free() {
    local port="$1"
    if command -v ss >/dev/null 2>&1; then
        [[ -z "$(ss -Htan exclude time-wait "sport = :$port" 2>/dev/null)" ]]
    else
        ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

# Prints a free port: the stored one if still free, else the first free from 54320 that is not among
# the ports already tried (a space-separated list).
_upshift_pg_pick_port() {
    local stored="${1:-}" tried=" ${2:-} " p
    if [[ "$stored" =~ ^[0-9]+$ ]] && [[ "$tried" != *" $stored "* ]] && _upshift_pg_port_free "$stored"; then
        printf '%s\n' "$stored"
        return 0
    fi
    for ((p = 54320; p < 54520; p++)); do
        [[ "$p" == "$stored" || "$tried" == *" $p "* ]] && continue
        if _upshift_pg_port_free "$p"; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    upshift_die "postgres: no free port in 54320-54519"
}

_upshift_pg_initdb() {
    local data="$UPSHIFT_PG_DIR/data" out
    [[ -f "$data/PG_VERSION" ]] && return 0
    if [[ -e "$data" ]]; then
        # Leftover of an interrupted initdb: it holds no data worth keeping.
        _upshift_pg_log "removing incomplete cluster at $data"
        rm -rf "$data"
    fi
    _upshift_pg_log "initdb $data ($("$UPSHIFT_PG_BINDIR/postgres" --version))"
    # Keep initdb's chatter out of the way, but show it when it fails.
    if ! out="$(upshift_run_as_cluster_user "$UPSHIFT_PG_BINDIR/initdb" -D "$data" -U postgres \
        --auth=trust --encoding=UTF8 --locale=C 2>&1)"; then
        printf '%s\n' "$out" >&2
        upshift_die "postgres: initdb failed"
    fi
}

# (Re)writes our settings block at the end of postgresql.conf; later lines win.
# Rewritten before every start so a moved checkout gets the right socket path.
_upshift_pg_write_conf() {
    local conf="$UPSHIFT_PG_DIR/data/postgresql.conf"
    local sock="$UPSHIFT_PG_DIR/sock"
    upshift_run_as_cluster_user mkdir -p "$sock"
    upshift_run_as_cluster_user chmod 700 "$sock"
    # Edit as the owner: sed -i as root would leave a root-owned, unreadable conf.
    upshift_run_as_cluster_user sed -i '/^# BEGIN upshift$/,/^# END upshift$/d' "$conf"
    # fsync/synchronous_commit are the defaults, but say so explicitly:
    # durability is a requirement and benchmarks must run with them on.
    # listen_addresses: loopback only; 127.0.0.2 too, the address through which scripts/chaos's server
    # reaches PostgreSQL, so that its partition (an nftables black hole) leaves the run's own sessions alone.
    # max_connections: scripts/test runs the untagged tests all at once, each server opening up to 28
    # connections (docs/OPERATIONS.md, "Database connections") beside the tests' own clients; at 1000 a
    # loaded run saw a hundred connections refused ("too many clients"), each a failed test.
    upshift_run_as_cluster_user tee -a "$conf" >/dev/null <<EOF
# BEGIN upshift
max_connections = 2000
shared_buffers = 256MB
listen_addresses = '127.0.0.1,127.0.0.2'
unix_socket_directories = '${sock//\'/\'\'}'
fsync = on
synchronous_commit = on
# END upshift
EOF
}

# Starts the cluster on a free port and sets UPSHIFT_PG_PORT. Retries with another
# port if someone grabbed ours between the check and the bind.
_upshift_pg_start() {
    local dir="$UPSHIFT_PG_DIR" stored port attempt tried=""
    stored="$(cat "$dir/port" 2>/dev/null || true)"
    for attempt in 1 2 3; do
        port="$(_upshift_pg_pick_port "$stored" "$tried")"
        tried+=" $port"
        printf '%s\n' "$port" | upshift_run_as_cluster_user tee "$dir/port" >/dev/null
        _upshift_pg_log "starting cluster at $dir on port $port"
        # Close the lock fd for the daemon: an inherited fd would keep the
        # flock held for the server's whole life and block every later run.
        # (closed in a subshell, so our own lock stays held).
        if (
            exec {_UPSHIFT_PG_LOCK_FD}<&-
            upshift_run_as_cluster_user "$UPSHIFT_PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" \
                -o "-p $port" -w -t 60 start >/dev/null
        ); then
            # It listens on 127.0.0.1 and 127.0.0.2, and starts when either bind works: a port held on
            # 127.0.0.1 by a client's connection (54320-54519 lie in Linux's ephemeral range, which `ss -l`
            # does not show) leaves it without the address everything uses. Stopped, and another port tried.
            if [[ -n "$(ss -Hltn "src 127.0.0.1 and sport = :$port" 2>/dev/null)" ]] || ! command -v ss >/dev/null 2>&1; then
                UPSHIFT_PG_PORT="$port"
                return 0
            fi
            _upshift_pg_log "port $port is taken on 127.0.0.1 (attempt $attempt), trying another"
            upshift_run_as_cluster_user "$UPSHIFT_PG_BINDIR/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
            stored=""
            continue
        fi
        if tail -n 20 "$dir/postgres.log" 2>/dev/null | grep -q 'could not bind\|Address already in use'; then
            _upshift_pg_log "port $port was taken (attempt $attempt), trying another"
            stored=""
            continue
        fi
        tail -n 20 "$dir/postgres.log" >&2 || true
        upshift_die "postgres: pg_ctl start failed (log: $dir/postgres.log)"
    done
    upshift_die "postgres: could not start on a free port (log: $dir/postgres.log)"
}

_upshift_pg_wait_ready() {
    local isready i
    isready="$(_upshift_pg_tool pg_isready)"
    for ((i = 0; i < 120; i++)); do
        "$isready" -q -h 127.0.0.1 -p "$UPSHIFT_PG_PORT" -U postgres && return 0
        sleep 0.5
    done
    upshift_die "postgres: not ready after 60s on port $UPSHIFT_PG_PORT (log: $UPSHIFT_PG_DIR/postgres.log)"
}

_upshift_pg_create_db() {
    local psql=("$(_upshift_pg_tool psql)" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$UPSHIFT_PG_PORT" -U postgres -d postgres)
    if [[ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = 'upshift'")" != 1 ]]; then
        _upshift_pg_log "creating database upshift"
        "${psql[@]}" -c 'CREATE DATABASE upshift'
    fi
}

# Ensures a running local cluster with database "upshift" and exports DATABASE_URL
# (plus UPSHIFT_PG_DIR, UPSHIFT_PG_PORT, UPSHIFT_PG_BINDIR, UPSHIFT_PG_USER).
# A DATABASE_URL from the environment wins and nothing is provisioned.
upshift_provision_postgres() {
    if [[ -n "${DATABASE_URL:-}" ]]; then
        _upshift_pg_log "using DATABASE_URL from the environment"
        export DATABASE_URL
        return 0
    fi

    if ! _upshift_pg_find_bindir; then
        _upshift_pg_log "server binaries not found; installing postgresql"
        upshift_apt_install postgresql
        _upshift_pg_find_bindir || upshift_die "postgres: initdb/pg_ctl/postgres still not found after install"
    fi
    _upshift_pg_choose_dir

    # Serialise concurrent runs (e.g. scripts/test and scripts/run at once) on
    # the cluster folder itself, so they do not race on initdb/start/createdb.
    exec {_UPSHIFT_PG_LOCK_FD}<"$UPSHIFT_PG_DIR"
    flock -w 300 "$_UPSHIFT_PG_LOCK_FD" || upshift_die "postgres: timed out waiting for the lock on $UPSHIFT_PG_DIR"

    _upshift_pg_initdb
    if _upshift_pg_running; then
        # The port it actually listens on is line 4 of postmaster.pid.
        UPSHIFT_PG_PORT="$(sed -n 4p "$UPSHIFT_PG_DIR/data/postmaster.pid")"
        _upshift_pg_log "cluster at $UPSHIFT_PG_DIR already running on port $UPSHIFT_PG_PORT"
    else
        _upshift_pg_write_conf
        _upshift_pg_start
    fi
    _upshift_pg_wait_ready
    _upshift_pg_create_db

    exec {_UPSHIFT_PG_LOCK_FD}<&-

    export UPSHIFT_PG_DIR UPSHIFT_PG_PORT UPSHIFT_PG_BINDIR UPSHIFT_PG_USER
    export DATABASE_URL="postgres://postgres@127.0.0.1:$UPSHIFT_PG_PORT/upshift"
    _upshift_pg_log "ready: DATABASE_URL=$DATABASE_URL (cluster at $UPSHIFT_PG_DIR, owner $UPSHIFT_PG_USER)"
}

# Stops the local cluster if it runs; the data stays for the next start.
upshift_stop_postgres() {
    _upshift_pg_find_bindir || { _upshift_pg_log "no server binaries; nothing to stop"; return 0; }
    _upshift_pg_choose_dir
    if _upshift_pg_running; then
        _upshift_pg_log "stopping cluster at $UPSHIFT_PG_DIR"
        upshift_run_as_cluster_user "$UPSHIFT_PG_BINDIR/pg_ctl" -D "$UPSHIFT_PG_DIR/data" -m fast -w stop >/dev/null
    else
        _upshift_pg_log "cluster at $UPSHIFT_PG_DIR is not running"
    fi
}
