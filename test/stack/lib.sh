# shellcheck shell=bash
# Shared helpers of the local stack scripts. Source it; it defines:
#
#   STACK_TOP  top of the repository
#   STACK_BIN  folder of the built tools (.cache/bin)
#   STACK_DIR  run folder (default .run/stack at the top; absolute once sourced)
#
# and functions whose names start with stack_. Every process started with
# stack_start gets KILOMESH_STACK_DIR=$STACK_DIR in its environment and a pid
# file $STACK_DIR/pids/<name>.pid; down.sh stops exactly those processes.

STACK_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
STACK_BIN=${STACK_BIN:-$STACK_TOP/.cache/bin}
STACK_DIR=${STACK_DIR:-$STACK_TOP/.run/stack}
case "$STACK_DIR" in
  *[[:space:]\'\"\\]*) echo "STACK_DIR must not hold spaces, quotes or backslashes: $STACK_DIR" >&2; exit 2 ;;
esac
mkdir -p "$STACK_DIR"
STACK_DIR=$(cd "$STACK_DIR" && pwd -P)
export STACK_TOP STACK_BIN STACK_DIR

stack_log() { printf '>> %s\n' "$*" >&2; }
stack_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# stack_free_ports N prints N distinct free TCP ports of 127.0.0.1, separated by
# spaces. All N sockets are bound at the same time, so the ports differ.
stack_free_ports() {
  python3 - "$1" <<'PY'
import socket
import sys

socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# stack_wait_url TIMEOUT_SECONDS URL [curl options...] polls URL until it answers
# with a 2xx status. Returns 1 on timeout.
stack_wait_url() {
  local timeout=$1 url=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.2
  done
}

stack_pid_file() { printf '%s/pids/%s.pid' "$STACK_DIR" "$1"; }

# stack_record_pid NAME PID writes PID to the pid file of NAME and appends NAME
# to $STACK_DIR/procs, the start order that down.sh reverses.
stack_record_pid() {
  mkdir -p "$STACK_DIR/pids"
  printf '%s\n' "$2" >"$(stack_pid_file "$1")"
  if ! grep -qxF "$1" "$STACK_DIR/procs" 2>/dev/null; then
    printf '%s\n' "$1" >>"$STACK_DIR/procs"
  fi
}

# stack_alive PID: the process exists and is not a zombie.
stack_alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# stack_owned PID: the process was started by stack_start for this STACK_DIR
# (its environment carries the marker), so a reused PID is never touched.
stack_owned() {
  [ -r "/proc/$1/environ" ] &&
    tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF "KILOMESH_STACK_DIR=$STACK_DIR"
}

# stack_running NAME prints the PID of NAME if that process is alive and ours.
stack_running() {
  local f pid
  f=$(stack_pid_file "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f")
  stack_alive "$pid" && stack_owned "$pid" && printf '%s\n' "$pid"
}

# stack_start NAME CMD [ARGS...] starts CMD in the background, detached from
# the terminal, logging to $STACK_DIR/logs/NAME.log. The command line is kept
# in $STACK_DIR/cmd/NAME so that start.sh can start it again after down.sh NAME.
stack_start() {
  local name=$1
  shift
  mkdir -p "$STACK_DIR/cmd" "$STACK_DIR/logs"
  {
    printf '#!/usr/bin/env bash\n'
    printf 'export KILOMESH_STACK_DIR=%q\n' "$STACK_DIR"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
  } >"$STACK_DIR/cmd/$name"
  chmod +x "$STACK_DIR/cmd/$name"
  stack_launch "$name"
}

# stack_launch NAME runs the recorded command of NAME and records its PID.
stack_launch() {
  local name=$1 pid
  if pid=$(stack_running "$name"); then
    stack_die "$name is already running (pid $pid)"
  fi
  nohup "$STACK_DIR/cmd/$name" >>"$STACK_DIR/logs/$name.log" 2>&1 </dev/null &
  pid=$!
  stack_record_pid "$name" "$pid"
}

# stack_set_ready NAME URL [curl options...] records how to tell that NAME is
# ready; stack_wait_ready NAME [TIMEOUT] waits for it (default 60 s) and fails
# with the end of NAME's log if it does not come, or if NAME exits first.
stack_set_ready() {
  local name=$1
  shift
  mkdir -p "$STACK_DIR/cmd"
  printf '%s\n' "$@" >"$STACK_DIR/cmd/$name.ready"
}

stack_wait_ready() {
  local name=$1 timeout=${2:-60} f pid deadline
  f=$STACK_DIR/cmd/$name.ready
  [ -f "$f" ] || return 0
  local args=()
  mapfile -t args <"$f"
  pid=$(cat "$(stack_pid_file "$name")")
  deadline=$((SECONDS + timeout))
  until curl -fsS -o /dev/null --max-time 2 "${args[@]:1}" "${args[0]}" 2>/dev/null; do
    if ! stack_alive "$pid"; then
      tail -n 30 "$STACK_DIR/logs/$name.log" >&2 || true
      stack_die "$name exited before it was ready (log: $STACK_DIR/logs/$name.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 30 "$STACK_DIR/logs/$name.log" >&2 || true
      stack_die "$name not ready after ${timeout}s (log: $STACK_DIR/logs/$name.log)"
    fi
    sleep 0.2
  done
}

# stack_stop NAME... stops the named processes: TERM, then KILL after
# STACK_GRACE seconds (default 15). Only PIDs from the pid files that still
# carry this STACK_DIR's marker are signalled. The pid files are removed.
stack_stop() {
  local grace=${STACK_GRACE:-15} name f pid pids=() names=()
  for name in "$@"; do
    f=$(stack_pid_file "$name")
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if stack_alive "$pid"; then
      if stack_owned "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid")
        names+=("$name")
      else
        stack_log "pid $pid of $name is not a process of this stack any more; left alone"
      fi
    fi
  done
  local deadline=$((SECONDS + grace)) i left
  while :; do
    left=0
    for i in "${!pids[@]}"; do
      stack_alive "${pids[$i]}" && left=1
    done
    [ "$left" = 0 ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
      for i in "${!pids[@]}"; do
        if stack_alive "${pids[$i]}" && stack_owned "${pids[$i]}"; then
          stack_log "killing ${names[$i]} (pid ${pids[$i]}) after ${grace}s"
          kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
      done
      sleep 0.2
      break
    fi
    sleep 0.1
  done
  for name in "$@"; do
    rm -f "$(stack_pid_file "$name")"
  done
}

# stack_env_load reads $STACK_DIR/env into the shell (see README.md).
stack_env_load() {
  [ -f "$STACK_DIR/env" ] || stack_die "no stack in $STACK_DIR (run test/stack/up.sh)"
  set -a
  # shellcheck disable=SC1091
  . "$STACK_DIR/env"
  set +a
}

# stack_var CLUSTER SUFFIX prints the env variable name of a cluster's value:
# stack_var cluster-a KUBECONFIG -> CLUSTER_A_KUBECONFIG.
stack_var() {
  local n=${1^^}
  printf '%s_%s' "${n//-/_}" "$2"
}

# stack_kubectl CLUSTER ARGS... runs the built kubectl as the cluster's admin.
stack_kubectl() {
  local c=$1
  shift
  "$STACK_BIN/kubectl" --kubeconfig "$STACK_DIR/$c/kubeconfig" "$@"
}
