#!/usr/bin/env bash
# Starts a local multi-cluster environment: one etcd and one kube-apiserver per
# cluster (sharing that etcd, each under its own prefix), all on 127.0.0.1 with
# random free ports, and kube-controller-managers as chosen by STACK_KCM.
#
#   test/stack/up.sh [cluster...]      (default: cluster-a cluster-b cluster-c)
#
# The first cluster is the management cluster. Environment:
#   STACK_DIR          run folder (default .run/stack at the top of the repository)
#   STACK_KCM          which clusters get a kube-controller-manager: all (default),
#                      first, none, or a space/comma separated list of clusters
#   STACK_NO_PEER_CRD  clusters that do NOT get Kilo's Peer CRD: all, or a list
#   STACK_PEER_CRD     the Peer CRD file (default test/crds/kilo.squat.ai_peers.yaml)
#   STACK_TIMEOUT      seconds to wait for each server (default 90)
#   STACK_KEEP_ON_FAILURE=1 leaves started processes running when up.sh fails
#   STACK_REAL_NODES=1 gives every cluster a real node (node.sh): containerd,
#                      a kubelet, kube-scheduler, kube-proxy and CoreDNS as
#                      pods; needs root (README.md, "Real nodes")
#   STACK_NO_REAL_NODE clusters that get no real node with STACK_REAL_NODES=1:
#                      a list, never the management cluster (whose node
#                      runs Crossplane)
#
# Writes $STACK_DIR/env (see README.md) and prints it on stdout; progress goes
# to stderr. Stop everything with test/stack/down.sh.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

clusters=("$@")
[ ${#clusters[@]} -gt 0 ] || clusters=(cluster-a cluster-b cluster-c)
for c in "${clusters[@]}"; do
  [[ "$c" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || stack_die "cluster name must be a DNS label: $c"
  case "$c" in stack|etcd) stack_die "cluster name $c is reserved" ;; esac
done
if [ "$(printf '%s\n' "${clusters[@]}" | sort | uniq -d)" != "" ]; then
  stack_die "cluster names repeat: ${clusters[*]}"
fi
timeout=${STACK_TIMEOUT:-90}
real_nodes=${STACK_REAL_NODES:-}
if [ "$real_nodes" = 1 ]; then
  [ "$(id -u)" = 0 ] || stack_die "STACK_REAL_NODES=1 needs root"
  [ ${#clusters[@]} -le 16 ] || stack_die "STACK_REAL_NODES=1 serves at most 16 clusters"
fi
peer_crd=${STACK_PEER_CRD:-$STACK_TOP/test/crds/kilo.squat.ai_peers.yaml}

# in_list WORD LIST: LIST is "all" or words separated by spaces or commas.
in_list() {
  local w
  for w in ${2//,/ }; do
    if [ "$w" = all ] || [ "$w" = "$1" ]; then
      return 0
    fi
  done
  return 1
}
wants_kcm() {
  case "${STACK_KCM:-all}" in
    first) [ "$1" = "${clusters[0]}" ] ;;
    none) return 1 ;;
    *) in_list "$1" "${STACK_KCM:-all}" ;;
  esac
}
# wants_node CLUSTER: the cluster gets a real node. The address plan is by
# position all the same, so a cluster's addresses do not depend on which
# others have a node.
wants_node() {
  [ "$real_nodes" = 1 ] && ! in_list "$1" "${STACK_NO_REAL_NODE:-}"
}
wants_peer_crd() {
  [ -f "$peer_crd" ] && ! in_list "$1" "${STACK_NO_PEER_CRD:-}"
}

# A run folder is reused only if it belongs to a stopped stack.
marker=$STACK_DIR/.kilomesh-stack
if [ -n "$(ls -A "$STACK_DIR")" ]; then
  [ -f "$marker" ] || stack_die "$STACK_DIR is not empty and is not a stack run folder; choose another STACK_DIR"
  for f in "$STACK_DIR"/pids/*.pid; do
    [ -e "$f" ] || continue
    if pid=$(stack_running "$(basename "$f" .pid)"); then
      stack_die "a stack is running in $STACK_DIR (pid $pid); stop it with test/stack/down.sh"
    fi
  done
  # A real node that a killed run left behind goes first: its mounts live
  # under the folder.
  for f in "$STACK_DIR"/*/node/plan; do
    [ -e "$f" ] || continue
    "$STACK_TOP/test/stack/node.sh" down "$(basename "$(dirname "$(dirname "$f")")")"
  done
  find "$STACK_DIR" -mindepth 1 -delete
fi
touch "$marker"

stack_log "building etcd and kube tools (skipped when up to date; the first build takes several minutes)"
"$STACK_TOP/test/tools/build.sh" etcd kube
if [ "$real_nodes" = 1 ]; then
  "$STACK_TOP/test/stack/node.sh" packages
  stack_log "building kubelet, kube-proxy, kube-scheduler and CoreDNS, and the pod images (skipped when up to date)"
  "$STACK_TOP/test/stack/node.sh" images
fi

started=$SECONDS
on_exit() {
  local rc=$?
  if [ "$rc" != 0 ] && [ "${STACK_KEEP_ON_FAILURE:-}" != 1 ]; then
    stack_log "up.sh failed; stopping what it started (STACK_KEEP_ON_FAILURE=1 keeps it)"
    "$STACK_TOP/test/stack/down.sh" >&2 || true
  fi
}
trap on_exit EXIT

# Ports: etcd client and peer, then per cluster the apiserver and the KCM.
n=${#clusters[@]}
read -r -a ports <<<"$(stack_free_ports $((2 + 3 * n)))"
etcd_port=${ports[0]}
etcd_peer_port=${ports[1]}
etcd_url=http://127.0.0.1:$etcd_port

stack_log "starting etcd on $etcd_url"
mkdir -p "$STACK_DIR/etcd"
stack_start etcd "$STACK_BIN/etcd" \
  --name=stack \
  --data-dir="$STACK_DIR/etcd/data" \
  --listen-client-urls="$etcd_url" \
  --advertise-client-urls="$etcd_url" \
  --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
  --initial-cluster="stack=http://127.0.0.1:$etcd_peer_port" \
  --unsafe-no-fsync \
  --log-level=warn
stack_set_ready etcd "$etcd_url/health"

# Certificates and keys of one cluster, in $STACK_DIR/<cluster>.
make_pki() {
  local c=$1 svc_ip=$2 d=$STACK_DIR/$1 extra=${mgmt_node_ip:+,IP:$mgmt_node_ip}
  mkdir -p "$d"
  (
    cd "$d"
    umask 077
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
      -keyout ca.key -out ca.crt -subj "/CN=$c-ca" \
      -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 \
      -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' \
      "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$svc_ip,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc$extra" \
      "extendedKeyUsage=serverAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >apiserver.ext
    openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key \
      -set_serial "0x$(openssl rand -hex 8)" -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    if [ -n "$mgmt_node_ip" ]; then
      # The apiserver's client certificate for the kubelets (logs, exec),
      # which accept x509 of the cluster's CA.
      openssl req -newkey rsa:2048 -nodes -sha256 -keyout kubelet-client.key -out kubelet-client.csr \
        -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
      printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >kubelet-client.ext
      openssl x509 -req -sha256 -days 3650 -in kubelet-client.csr -CA ca.crt -CAkey ca.key \
        -set_serial "0x$(openssl rand -hex 8)" -extfile kubelet-client.ext -out kubelet-client.crt 2>/dev/null
      rm -f kubelet-client.csr kubelet-client.ext
    fi
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f apiserver.csr apiserver.ext
    printf '%s,admin,admin,"system:masters"\n' "$(openssl rand -hex 24)" >tokens.csv
  )
}

# The node's kubelet and kube-proxy get tokens of their own identities:
# system:node:<node> (the Node authorizer and NodeRestriction) and
# system:kube-proxy (bound to system:node-proxier by default).
declare -A node_ip
if [ "$real_nodes" = 1 ]; then
  wants_node "${clusters[0]}" || stack_die "the management cluster ${clusters[0]} needs its real node: it runs Crossplane"
  i=0
  for c in "${clusters[@]}"; do
    wants_node "$c" && "$STACK_TOP/test/stack/node.sh" plan "$c" "$i" >/dev/null
    i=$((i + 1))
  done
fi
# plan_var CLUSTER NAME prints a value of the cluster's node plan.
plan_var() { sed -n "s/^$2='\\(.*\\)'\$/\\1/p" "$STACK_DIR/$1/node/plan"; }
node_tokens() {
  local c=$1
  [ -f "$STACK_DIR/$c/node/plan" ] || return 0
  printf '%s,system:node:%s,node-%s,"system:nodes"\n' "$(plan_var "$c" NODE_TOKEN)" "$(plan_var "$c" NODE)" "$(plan_var "$c" NODE)" >>"$STACK_DIR/$c/tokens.csv"
  printf '%s,system:kube-proxy,kube-proxy\n' "$(plan_var "$c" PROXY_TOKEN)" >>"$STACK_DIR/$c/tokens.csv"
  node_ip[$c]=$(plan_var "$c" NODE_IP)
}

# With real nodes, the management cluster's pods (Crossplane's providers)
# reach every apiserver at the management node's address, where a
# forwarder listens: every serving certificate names it.
mgmt_node_ip=
if [ "$real_nodes" = 1 ]; then
  mgmt_node_ip=$(plan_var "${clusters[0]}" NODE_IP)
fi
stack_log "making certificates and keys"
i=0
pki_pids=()
for c in "${clusters[@]}"; do
  make_pki "$c" "10.$((101 + i)).0.1" &
  pki_pids+=($!)
  i=$((i + 1))
done
for p in "${pki_pids[@]}"; do
  wait "$p" || stack_die "making certificates failed"
done
for c in "${clusters[@]}"; do
  node_tokens "$c"
done
stack_wait_ready etcd "$timeout"

declare -A api_port kcm_port sched_port svc_cidr token
i=0
for c in "${clusters[@]}"; do
  d=$STACK_DIR/$c
  api_port[$c]=${ports[$((2 + 3 * i))]}
  kcm_port[$c]=${ports[$((3 + 3 * i))]}
  sched_port[$c]=${ports[$((4 + 3 * i))]}
  # With a real node, pods reach the apiserver at the kubernetes Service,
  # whose endpoint (the lease reconciler's) is the node's address: a
  # forwarder there relays to the apiserver on the host's loopback. The
  # apiserver calls webhooks at their Service's endpoints (pod addresses,
  # routed to the node), not at ClusterIPs, which the host does not route.
  node_flags=(--advertise-address=127.0.0.1 --endpoint-reconciler-type=none --authorization-mode=RBAC)
  if [ -n "${node_ip[$c]:-}" ]; then
    # shellcheck disable=SC2054 # commas inside flag values
    node_flags=(
      --advertise-address="${node_ip[$c]}" --endpoint-reconciler-type=lease
      --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
      --allow-privileged=true --kubelet-preferred-address-types=InternalIP
      --enable-aggregator-routing=true
      --kubelet-client-certificate="$d/kubelet-client.crt" --kubelet-client-key="$d/kubelet-client.key"
    )
  fi
  # 10.101.0.0/16, 10.102.0.0/16, ...: the serviceCIDRs that
  # examples/mesh.yaml declares for cluster-a, -b and -c, so that a mesh
  # routes the members' real Services.
  svc_cidr[$c]=10.$((101 + i)).0.0/16
  token[$c]=$(head -n1 "$d/tokens.csv" | cut -d, -f1)
  server=https://127.0.0.1:${api_port[$c]}
  stack_write_kubeconfig "$d/kubeconfig" "$c" "$c" "$server" "$d/ca.crt" "admin@$c" "${token[$c]}"
  # Every write of a ClusterRole is audited (who, what, when): the
  # aggregation controller and Helm race on Crossplane's ClusterRoles
  # (docs/install.md), and a leftover is explained by its writers. So is
  # every list and watch of the kinds provider-kilomesh watches to share
  # Services, by its identity in a member: a watch that runs on is never
  # listed again (the e2e's hostile tenant of Services).
  cat >"$d/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources: [{group: rbac.authorization.k8s.io, resources: [clusterroles]}]
- level: Metadata
  users: ["system:serviceaccount:kube-system:kilomesh"]
  verbs: [list, watch]
  resources:
  - {group: "", resources: [services]}
  - {group: discovery.k8s.io, resources: [endpointslices]}
  - {group: multicluster.x-k8s.io, resources: [serviceexports, serviceimports]}
- level: None
YAML
  stack_log "starting kube-apiserver of $c on $server"
  stack_start "$c-apiserver" "$STACK_BIN/kube-apiserver" \
    --etcd-servers="$etcd_url" \
    --etcd-prefix="/$c" \
    --bind-address=127.0.0.1 \
    "${node_flags[@]}" \
    --secure-port="${api_port[$c]}" \
    --tls-cert-file="$d/apiserver.crt" \
    --tls-private-key-file="$d/apiserver.key" \
    --client-ca-file="$d/ca.crt" \
    --token-auth-file="$d/tokens.csv" \
    --service-account-key-file="$d/sa.pub" \
    --service-account-signing-key-file="$d/sa.key" \
    --service-account-issuer="$server" \
    --service-cluster-ip-range="${svc_cidr[$c]}" \
    --enable-priority-and-fairness=false \
    --shutdown-watch-termination-grace-period=2s \
    --audit-policy-file="$d/audit-policy.yaml" \
    --audit-log-path="$d/audit.log" \
    --audit-log-maxsize=50 \
    --audit-log-maxbackup=1 \
    --profiling=false
  stack_set_ready "$c-apiserver" "$server/readyz" --cacert "$d/ca.crt" -H "Authorization: Bearer ${token[$c]}"
  i=$((i + 1))
done
for c in "${clusters[@]}"; do
  stack_wait_ready "$c-apiserver" "$timeout"
  stack_log "$c ready after $((SECONDS - started))s"
done

kcm_controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token
if [ "$real_nodes" = 1 ]; then
  # What pods need: a kube-root-ca.crt ConfigMap in every namespace (their
  # projected token volumes), Deployments, DaemonSets, EndpointSlices (also
  # mirrored from the Endpoints of a Service without a selector, which
  # Kilo's multi-cluster Services recipe writes); and what Crossplane's
  # Helm chart needs: its ClusterRoles are aggregated.
  kcm_controllers=$kcm_controllers,root-ca-cert-publisher,deployment,replicaset,daemonset,endpointslice,endpointslicemirroring,clusterrole-aggregation
fi
for c in "${clusters[@]}"; do
  wants_kcm "$c" || [ "$real_nodes" = 1 ] || continue
  d=$STACK_DIR/$c
  stack_log "starting kube-controller-manager of $c"
  stack_start "$c-kcm" "$STACK_BIN/kube-controller-manager" \
    --kubeconfig="$d/kubeconfig" \
    --authentication-kubeconfig="$d/kubeconfig" \
    --authorization-kubeconfig="$d/kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${kcm_port[$c]}" \
    --cert-dir="$d/kcm-certs" \
    --controllers="$kcm_controllers" \
    --leader-elect=false \
    --service-account-private-key-file="$d/sa.key" \
    --root-ca-file="$d/ca.crt" \
    --profiling=false
  stack_set_ready "$c-kcm" "https://127.0.0.1:${kcm_port[$c]}/healthz" -k
  if [ "$real_nodes" = 1 ]; then
    stack_start "$c-scheduler" "$STACK_BIN/kube-scheduler" \
      --kubeconfig="$d/kubeconfig" \
      --authentication-kubeconfig="$d/kubeconfig" \
      --authorization-kubeconfig="$d/kubeconfig" \
      --bind-address=127.0.0.1 \
      --secure-port="${sched_port[$c]}" \
      --leader-elect=false \
      --profiling=false
    stack_set_ready "$c-scheduler" "https://127.0.0.1:${sched_port[$c]}/healthz" -k
  fi
done

for c in "${clusters[@]}"; do
  wants_peer_crd "$c" || continue
  stack_log "applying Kilo's Peer CRD to $c"
  stack_kubectl "$c" apply -f "$peer_crd" >/dev/null
done
for c in "${clusters[@]}"; do
  wants_peer_crd "$c" || continue
  stack_kubectl "$c" wait --for=condition=Established --timeout="${timeout}s" crd/peers.kilo.squat.ai >/dev/null
done
for c in "${clusters[@]}"; do
  wants_kcm "$c" || [ "$real_nodes" = 1 ] || continue
  stack_wait_ready "$c-kcm" "$timeout"
  [ "$real_nodes" != 1 ] || stack_wait_ready "$c-scheduler" "$timeout"
done

env_tmp=$STACK_DIR/env.tmp
{
  printf "STACK_DIR='%s'\n" "$STACK_DIR"
  printf "STACK_BIN='%s'\n" "$STACK_BIN"
  printf "STACK_CLUSTERS='%s'\n" "${clusters[*]}"
  printf "STACK_MANAGEMENT='%s'\n" "${clusters[0]}"
  printf "ETCD_ENDPOINT='%s'\n" "$etcd_url"
  printf "STACK_REAL_NODES='%s'\n" "$real_nodes"
  for c in "${clusters[@]}"; do
    d=$STACK_DIR/$c
    crd=false kcm=false
    wants_peer_crd "$c" && crd=true
    if wants_kcm "$c" || [ "$real_nodes" = 1 ]; then kcm=true; fi
    printf "%s='%s'\n" \
      "$(stack_var "$c" SERVER)" "https://127.0.0.1:${api_port[$c]}" \
      "$(stack_var "$c" PORT)" "${api_port[$c]}" \
      "$(stack_var "$c" KUBECONFIG)" "$d/kubeconfig" \
      "$(stack_var "$c" CA)" "$d/ca.crt" \
      "$(stack_var "$c" TOKEN)" "${token[$c]}" \
      "$(stack_var "$c" ETCD_PREFIX)" "/$c" \
      "$(stack_var "$c" SERVICE_CIDR)" "${svc_cidr[$c]}" \
      "$(stack_var "$c" KCM)" "$kcm" \
      "$(stack_var "$c" PEER_CRD)" "$crd"
    if wants_node "$c"; then
      for v in NODE NODE_IP NODE_NETNS POD_CIDR DNS_IP; do
        printf "%s='%s'\n" "$(stack_var "$c" "$v")" "$(plan_var "$c" "$v")"
      done
    fi
    if [ "$real_nodes" = 1 ]; then
      # Where the management cluster's pods reach this apiserver.
      printf "%s='%s'\n" "$(stack_var "$c" POD_SERVER)" "https://$mgmt_node_ip:${api_port[$c]}"
    fi
  done
} >"$env_tmp"
mv "$env_tmp" "$STACK_DIR/env"

if [ "$real_nodes" = 1 ]; then
  node_pids=()
  for c in "${clusters[@]}"; do
    wants_node "$c" || continue
    "$STACK_TOP/test/stack/node.sh" up "$c" &
    node_pids+=($!)
  done
  for p in "${node_pids[@]}"; do
    wait "$p" || stack_die "a real node did not come up"
  done
  node_pids=()
  for c in "${clusters[@]}"; do
    wants_node "$c" || continue
    "$STACK_TOP/test/stack/node.sh" addons "$c" &
    node_pids+=($!)
  done
  for p in "${node_pids[@]}"; do
    wait "$p" || stack_die "kube-proxy or CoreDNS did not come up"
  done
  # Every other apiserver, from the management node (its own is there).
  for c in "${clusters[@]:1}"; do
    "$STACK_TOP/test/stack/node.sh" forward "${clusters[0]}" "$c-api" "${api_port[$c]}"
  done
fi
stack_log "stack up in $((SECONDS - started))s; env in $STACK_DIR/env; stop with test/stack/down.sh"
cat "$STACK_DIR/env"
