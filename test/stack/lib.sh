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
  # grep reads the file itself: a pipe into grep -q fails under pipefail
  # whenever grep matches before the writer is done (SIGPIPE), which a
  # large environment makes likely.
  grep -qzxF "KILOMESH_STACK_DIR=$STACK_DIR" "/proc/$1/environ" 2>/dev/null
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

# stack_write_kubeconfig OUT CONTEXT CLUSTER SERVER CA_FILE USER TOKEN writes a
# kubeconfig (mode 600, replaced atomically) that reaches SERVER as USER with
# TOKEN, trusting CA_FILE.
stack_write_kubeconfig() {
  local out=$1 context=$2 c=$3 server=$4 ca=$5 user=$6 token=$7 tmp
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp "$(dirname "$out")/.kubeconfig.XXXXXX")
  chmod 600 "$tmp"
  cat >"$tmp" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: $c
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$ca")
users:
- name: $user
  user:
    token: $token
contexts:
- name: $context
  context:
    cluster: $c
    user: $user
current-context: $context
YAML
  mv "$tmp" "$out"
}

# stack_wait_for TIMEOUT DESCRIPTION COMMAND... retries COMMAND every half
# second until it succeeds, and dies naming DESCRIPTION after TIMEOUT seconds.
stack_wait_for() {
  local timeout=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || stack_die "$what: not done after ${timeout}s"
    sleep 0.5
  done
}

# stack_netns_start NAME PORTS NAMESPACE CMD [ARGS...] starts CMD like
# stack_start, but in a network namespace of its own, for servers that
# listen on fixed ports of every address (Crossplane's RBAC manager serves
# its metrics on :8080): two stacks, or anything else on the machine, cannot
# collide with them. Inside, 127.0.0.1:PORT reaches 127.0.0.1:PORT of the
# machine for every port of PORTS (space-separated), through a unix socket
# per port in $STACK_DIR/netns that the process NAME-bridge serves. CMD also
# gets a mount namespace with a /run of its own holding
# /run/secrets/kubernetes.io/serviceaccount/namespace, as a pod does: it
# says NAMESPACE (controller-runtime takes its leader election namespace
# from it). down.sh stops both.
stack_netns_start() {
  local name=$1 ports=$2 podns=$3 d=$STACK_DIR/netns p
  shift 3
  mkdir -p "$d"
  stack_proxy_script >"$d/proxy.py"
  for p in $ports; do
    stack_start "$name-bridge-$p" python3 "$d/proxy.py" unix "$d/$name-$p.sock" "$p"
  done
  for p in $ports; do
    stack_wait_for 30 "the bridge of $name to port $p" test -S "$d/$name-$p.sock"
  done
  cat >"$d/$name.sh" <<'SH'
#!/usr/bin/env bash
# Runs inside the namespace: loopback up, one forwarder per port, then the
# command; TERM stops them all.
set -u
dir=$1 name=$2 ports=$3 podns=$4
shift 4
ip link set lo up
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
printf '%s' "$podns" >/run/secrets/kubernetes.io/serviceaccount/namespace
fwd=()
for p in $ports; do
  python3 "$dir/proxy.py" tcp "$p" "$dir/$name-$p.sock" &
  fwd+=($!)
done
for p in $ports; do
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.1; done
done
"$@" &
main=$!
trap 'kill -TERM "$main" 2>/dev/null || true' TERM INT
rc=0
while kill -0 "$main" 2>/dev/null; do wait "$main" || rc=$?; done
kill "${fwd[@]}" 2>/dev/null || true
exit "$rc"
SH
  stack_start "$name" unshare --net --mount --propagation private -- bash "$d/$name.sh" "$d" "$name" "$ports" "$podns" "$@"
}

# stack_proxy_script prints a byte proxy: "unix SOCKET PORT" accepts on
# SOCKET and connects to 127.0.0.1:PORT; "tcp PORT SOCKET [ADDRESS]" accepts
# on ADDRESS:PORT (default 127.0.0.1; 0.0.0.0 only inside a network
# namespace of the stack) and connects to SOCKET.
stack_proxy_script() {
  cat <<'PY'
import os
import socket
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(listener, dial):
    while True:
        conn, _ = listener.accept()
        try:
            upstream = dial()
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()


if sys.argv[1] == "unix":
    path, port = sys.argv[2], int(sys.argv[3])
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    lis = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    lis.bind(path)
    lis.listen(64)
    serve(lis, lambda: socket.create_connection(("127.0.0.1", port)))
else:
    port, path = int(sys.argv[2]), sys.argv[3]
    addr = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    lis = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lis.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lis.bind((addr, port))
    lis.listen(64)

    def dial():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s

    serve(lis, dial)
PY
}

# stack_doc FILE NAME prints the shell block of a Markdown page (relative to
# the top of the repository) that the comment <!-- stack: NAME --> precedes:
# the commands the documentation gives users, which the stack runs as they
# are.
stack_doc() {
  awk -v want="<!-- stack: $2 -->" '
    $0 == want { marked = 1; next }
    marked && /^```/ && !inside { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }
  ' "$STACK_TOP/$1"
}

# stack_doc_run FILE NAME [VAR=VALUE...] runs that block with bash -euo
# pipefail from the top of the repository, as the administrator of every
# cluster: KUBECONFIG holds a context per cluster, named after it, the
# management cluster's current; kubectl and crossplane are the built ones.
# A line of the block that assigns one of the VARs (VAR=...) is left out and
# the VAR given instead, so a block written for cluster-a serves any member.
stack_doc_run() {
  local file=$1 name=$2 body kcfg="" c v
  shift 2
  [ -n "${STACK_MANAGEMENT:-}" ] || stack_env_load
  body=$(stack_doc "$file" "$name")
  [ -n "$body" ] || stack_die "$file has no shell block marked <!-- stack: $name -->"
  for v in "$@"; do
    body=$(printf '%s\n' "$body" | grep -v -E "^${v%%=*}=" || true)
  done
  for c in $STACK_MANAGEMENT $STACK_CLUSTERS; do
    case ":$kcfg:" in *":$STACK_DIR/$c/kubeconfig:"*) ;; *) kcfg=${kcfg:+$kcfg:}$STACK_DIR/$c/kubeconfig ;; esac
  done
  (
    cd "$STACK_TOP" || exit 1
    export KUBECONFIG=$kcfg PATH=$STACK_BIN:$PATH
    for v in "$@"; do export "${v?}"; done
    bash -euo pipefail -c "$body"
  )
}
