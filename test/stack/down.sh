#!/usr/bin/env bash
# Stops the processes of the local stack: exactly the PIDs recorded in
# $STACK_DIR/pids, and only while they still carry this stack's marker.
#
#   test/stack/down.sh            stop everything, newest first (real
#                                 nodes first of all: node.sh down)
#   test/stack/down.sh NAME...    stop only these (e.g. cluster-b-apiserver);
#                                 test/stack/start.sh NAME starts them again
#
# TERM first, KILL after STACK_GRACE seconds (default 15). Pid files are
# removed; logs, certificates and etcd data stay until the next up.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ $# -gt 0 ]; then
  stack_stop "$@"
  exit 0
fi

# The data-plane harness first: it runs wireguard-go in the real nodes'
# namespaces and removes what it added there while they still exist.
if [ -f "$STACK_DIR/pids/dataplane-agent.pid" ]; then
  stack_stop dataplane-agent
fi
# Real nodes first (node.sh down): their kubelets, pods, containerd,
# namespaces, cgroups and mounts, while the rest still runs.
for f in "$STACK_DIR"/*/node/plan; do
  [ -e "$f" ] || continue
  "$STACK_TOP/test/stack/node.sh" down "$(basename "$(dirname "$(dirname "$f")")")" || true
done

# Newest first, so that clients go before the servers they talk to; pid
# files that are not in the start order (recorded by hand) go first of all.
order=()
if [ -f "$STACK_DIR/procs" ]; then
  mapfile -t order < <(tac "$STACK_DIR/procs")
fi
extra=()
for f in "$STACK_DIR"/pids/*.pid; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .pid)
  case " ${order[*]} " in *" $name "*) ;; *) extra+=("$name") ;; esac
done
[ ${#extra[@]} -eq 0 ] || stack_stop "${extra[@]}"
# Everything but the first-started process (etcd) stops together, then etcd.
if [ ${#order[@]} -gt 1 ]; then
  stack_stop "${order[@]:0:${#order[@]}-1}"
fi
if [ ${#order[@]} -gt 0 ]; then
  stack_stop "${order[@]: -1}"
fi
stack_log "stack in $STACK_DIR stopped"
