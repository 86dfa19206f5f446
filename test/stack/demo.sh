#!/usr/bin/env bash
# make demo: a ClusterMesh of three member clusters, for real, on this
# machine. Builds what is missing (the first time takes 10 to 20 minutes on
# 2 cores; progress is shown), starts three kube-apiservers and Crossplane
# (test/stack/up.sh, crossplane-up.sh), installs kilomesh from its packages,
# seeds the members with Kilo Nodes (test/stack/fixture), starts the
# data-plane harness in place of Kilo's agents (test/dataplane: a network
# namespace per Node, real WireGuard tunnels, Kilo's heartbeat), applies
# examples/mesh.yaml and prints, once every member holds exactly the Peers
# the planner computes, the Peers of every member, the ClusterMesh status and
# which members' pods reach which through the tunnels. With real nodes,
# each real node joins the mesh (Kilo's annotations, the harness's agent in
# its namespace), and a table of real pods' HTTP requests to a pod and to a
# Service of every other member follows (test/stack/meshpods); then the
# mesh shares Services (docs/services.md), cluster-a exports hello, and the
# other members' pods ask for hello.mesh-pods.svc.clusterset.local.
#
#   test/stack/demo.sh        (make demo)
#   test/stack/demo-down.sh   (make demo-down) stops exactly what it started
#
# As root it gives every cluster a real node (STACK_REAL_NODES=1, see
# node.sh): Crossplane is installed by its Helm chart on cluster-a's node
# and runs kilomesh's packages as pods. STACK_REAL_NODES=0 (or not root)
# runs the earlier way: Crossplane and the packages as local processes.
#
# It runs in STACK_DIR (default .run/demo). Run it again while the demo is
# up to print the mesh again.
set -euo pipefail
export STACK_DIR=${STACK_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)/.run/demo}
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
cd "$STACK_TOP"
here=$STACK_TOP/test/stack
started=$SECONDS

# progress LABEL CMD... runs CMD and says every 30 s that it still runs.
progress() {
  local label=$1 pid t0=$SECONDS
  shift
  "$@" &
  pid=$!
  while ! wait_for_pid "$pid" 30; do
    stack_log "$label: still running after $((SECONDS - t0))s"
  done
  wait "$pid"
}
# wait_for_pid PID SECONDS: true once PID has exited, false after SECONDS.
wait_for_pid() {
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.2
  done
  return 1
}

kc() { stack_kubectl cluster-a "$@"; }

if [ -z "${STACK_REAL_NODES:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    STACK_REAL_NODES=1
  else
    stack_log "not root: no real nodes; Crossplane and the packages run as local processes"
    STACK_REAL_NODES=0
  fi
fi
[ "$STACK_REAL_NODES" = 1 ] || STACK_REAL_NODES=
export STACK_REAL_NODES

running() {
  if [ -f "$STACK_DIR/env" ] && grep -qx "STACK_REAL_NODES='1'" "$STACK_DIR/env"; then
    stack_running registry >/dev/null && stack_running cluster-a-kubelet >/dev/null
  else
    stack_running crossplane >/dev/null && stack_running provider-kilomesh >/dev/null
  fi
}

if running; then
  stack_log "the demo is already running in $STACK_DIR; showing it again (make demo-down stops it)"
else
  stack_log "building the tools (cached in .cache/bin; the first build takes 10 to 20 minutes on 2 cores)"
  tools=(etcd kube crossplane crossplane-cli crane provider-kubernetes wireguard-go)
  [ -z "$STACK_REAL_NODES" ] || tools+=(kube-node coredns-mcs helm)
  progress "building the tools" "$STACK_TOP/test/tools/build.sh" "${tools[@]}"
  for p in function provider configuration provider-kubernetes; do
    progress "building the $p package" env VERSION="${STACK_VERSION:-v0.2.0}" "$STACK_TOP/package/build.sh" "$p" >/dev/null
  done
  if [ -n "$STACK_REAL_NODES" ]; then
    stack_log "starting three member clusters with a real node each (cluster-a is also the management cluster)"
  else
    stack_log "starting three member clusters (cluster-a is also the management cluster)"
  fi
  "$here/up.sh" cluster-a cluster-b cluster-c >/dev/null
  STACK_NO_BUILD=1 "$here/crossplane-up.sh"
  "$here/providerconfigs.sh" network cluster-a cluster-b cluster-c
fi

mkdir -p "$STACK_DIR/bin"
go build -o "$STACK_DIR/bin/meshtool" ./test/stack/meshtool
stack_log "seeding the members with Kilo Nodes (no Kilo agent: the annotations Kilo would write)"
"$STACK_DIR/bin/meshtool" seed cluster-a cluster-b cluster-c
if ! stack_running dataplane-agent >/dev/null; then
  agent=(agent)
  if [ "$(id -u)" != 0 ] || [ ! -c /dev/net/tun ]; then
    stack_log "no data plane: it needs root and /dev/net/tun; Kilo's heartbeat only"
    agent+=(--heartbeat-only)
  else
    stack_log "standing in for Kilo's agents: a network namespace per Node, WireGuard on the leaders (test/dataplane)"
  fi
  stack_start dataplane-agent "$STACK_DIR/bin/meshtool" --stack-dir "$STACK_DIR" "${agent[@]}" cluster-a cluster-b cluster-c
fi
dataplane=
if [ "$(id -u)" = 0 ] && [ -c /dev/net/tun ]; then
  dataplane=1
fi
real_pods=
if [ -n "$dataplane" ] && grep -qx "STACK_REAL_NODES='1'" "$STACK_DIR/env"; then
  real_pods=1
  stack_log "real pods in every member (namespace mesh-pods): hello behind a Service, a client, and Kilo's mirrored Services"
  "$STACK_DIR/bin/meshtool" pods --deploy-only
fi
stack_log "docs/install.md: kubectl apply -f examples/mesh.yaml"
stack_doc_run docs/install.md mesh >/dev/null
"$STACK_DIR/bin/meshtool" wait --namespace network --name mesh --timeout 5m

"$STACK_DIR/bin/meshtool" show --namespace network --name mesh
printf '\n$ kubectl get clustermesh -n network\n'
kc get clustermesh -n network
if [ -n "$dataplane" ]; then
  "$STACK_DIR/bin/meshtool" matrix || stack_log "some pods do not reach each other (above)"
fi
if [ -n "$real_pods" ]; then
  "$STACK_DIR/bin/meshtool" pods || stack_log "some real pods do not reach another member (above)"
  stack_log "docs/services.md: Services shared on the mesh in namespace mesh-pods; cluster-a exports hello"
  stack_doc_run docs/services.md share >/dev/null
  "$STACK_DIR/bin/meshtool" services || stack_log "some members do not reach the exported Service (above)"
fi

# The mesh as kubectl kilomesh shows it (docs/observability.md).
go build -o "$STACK_DIR/bin/kubectl-kilomesh" ./cmd/kubectl-kilomesh
kk=("$STACK_DIR/bin/kubectl-kilomesh" --kubeconfig "$STACK_DIR/cluster-a/kubeconfig" -n network)
printf '\n$ kubectl kilomesh status mesh -n network\n'
"${kk[@]}" status mesh || true
svg=$STACK_DIR/mesh.svg
if ! command -v dot >/dev/null; then
  svg=$STACK_DIR/mesh.dot # without Graphviz the plugin writes DOT
fi
"${kk[@]}" graph mesh -o svg >"$svg" 2>/dev/null || true
stack_log "the mesh as a picture: $svg (kubectl kilomesh graph mesh -n network -o svg)"
cat <<EOF

The demo runs in $STACK_DIR ($((SECONDS - started))s to get here). Try:
  export KUBECONFIG=$STACK_DIR/cluster-a/kubeconfig
  .cache/bin/kubectl get clustermesh,nodeinventories,objects -n network
  .cache/bin/kubectl get pods -A -o wide          (with real nodes: Crossplane and the packages as pods)
  .cache/bin/kubectl get svc,endpoints -n mesh-pods  (with real nodes: hello, and Kilo's mirrors hello-<member>)
  .cache/bin/kubectl --kubeconfig $STACK_DIR/cluster-b/kubeconfig get serviceimports,endpointslices -n mesh-pods  (with real nodes: hello, imported)
  .cache/bin/kubectl --kubeconfig $STACK_DIR/cluster-b/kubeconfig get peers
  .cache/bin/kubectl --kubeconfig $STACK_DIR/cluster-c/kubeconfig annotate node node-c1 --overwrite kilo.squat.ai/force-endpoint=192.0.2.99:51820
  STACK_DIR=$STACK_DIR $STACK_DIR/bin/meshtool show
  $STACK_DIR/bin/kubectl-kilomesh --kubeconfig $STACK_DIR/cluster-a/kubeconfig diagnose mesh -n network
Stop it with: make demo-down
EOF
