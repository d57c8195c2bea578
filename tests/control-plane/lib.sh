# Shared by build, up, down and restart: paths, one-line errors and process handling. Sourced, not run.

cp_root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$cp_root/../.." && pwd)
# Where build puts the binaries and up looks for them (SLUICE_CONTROL_PLANE_BIN overrides).
cp_bin=${SLUICE_CONTROL_PLANE_BIN:-$repo_root/target/control-plane/bin}

# How long kube-apiserver and kube-controller-manager get to become ready (SLUICE_CP_READY_TIMEOUT overrides).
ready_timeout=${SLUICE_CP_READY_TIMEOUT:-60}

# Prints "error: ..." on one line and exits 1.
die() {
    echo "error: $*" >&2
    exit 1
}

# Reads KEY from DIR/state (written by up).
state_get() {
    sed -n "s/^$2=//p" "$1/state" | tail -n 1
}

# True while the process with this pid runs (and is not a zombie).
alive() {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# Stops the process whose pid is in FILE: SIGTERM, up to GRACE seconds (default 5), then SIGKILL; removes FILE.
# (kube-apiserver drains its watches for a minute on SIGTERM; nothing here needs that.)
stop_pidfile() {
    local file=$1 grace=${2:-5} pid i
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for i in $(seq 1 $((grace * 10))); do
            alive "$pid" || break
            sleep 0.1
        done
        if alive "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.2
        fi
    fi
    rm -f "$file"
}

# A TCP port on 127.0.0.1 that nothing listens on now (the caller retries if it is taken before it binds).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts a command in its own session, detached from this shell, its output in LOG; writes its pid to PIDFILE.
spawn() {
    local log=$1 pidfile=$2
    shift 2
    setsid "$@" >>"$log" 2>&1 </dev/null &
    echo $! >"$pidfile"
}

# Waits up to SECONDS for CHECK (a command) to succeed while PIDFILE's process lives. Returns 0 when ready, 1 when
# the process died, 2 on time-out.
wait_ready() {
    local seconds=$1 pidfile=$2 deadline
    shift 2
    deadline=$((SECONDS + seconds))
    while [ $SECONDS -lt $deadline ]; do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        alive "$(cat "$pidfile")" || return 1
        sleep 0.2
    done
    return 2
}
