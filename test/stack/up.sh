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
  find "$STACK_DIR" -mindepth 1 -delete
fi
touch "$marker"

stack_log "building etcd and kube tools (skipped when up to date; the first build takes several minutes)"
"$STACK_TOP/test/tools/build.sh" etcd kube

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
read -r -a ports <<<"$(stack_free_ports $((2 + 2 * n)))"
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
  local c=$1 svc_ip=$2 d=$STACK_DIR/$1
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
      "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:$svc_ip,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
      "extendedKeyUsage=serverAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >apiserver.ext
    openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key \
      -set_serial "0x$(openssl rand -hex 8)" -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f apiserver.csr apiserver.ext
    printf '%s,admin,admin,"system:masters"\n' "$(openssl rand -hex 24)" >tokens.csv
  )
}

stack_log "making certificates and keys"
i=0
pki_pids=()
for c in "${clusters[@]}"; do
  make_pki "$c" "10.$((96 + i)).0.1" &
  pki_pids+=($!)
  i=$((i + 1))
done
for p in "${pki_pids[@]}"; do
  wait "$p" || stack_die "making certificates failed"
done
stack_wait_ready etcd "$timeout"

declare -A api_port kcm_port svc_cidr token
i=0
for c in "${clusters[@]}"; do
  d=$STACK_DIR/$c
  api_port[$c]=${ports[$((2 + 2 * i))]}
  kcm_port[$c]=${ports[$((3 + 2 * i))]}
  svc_cidr[$c]=10.$((96 + i)).0.0/16
  token[$c]=$(cut -d, -f1 "$d/tokens.csv")
  server=https://127.0.0.1:${api_port[$c]}
  stack_write_kubeconfig "$d/kubeconfig" "$c" "$c" "$server" "$d/ca.crt" "admin@$c" "${token[$c]}"
  stack_log "starting kube-apiserver of $c on $server"
  stack_start "$c-apiserver" "$STACK_BIN/kube-apiserver" \
    --etcd-servers="$etcd_url" \
    --etcd-prefix="/$c" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none \
    --secure-port="${api_port[$c]}" \
    --tls-cert-file="$d/apiserver.crt" \
    --tls-private-key-file="$d/apiserver.key" \
    --client-ca-file="$d/ca.crt" \
    --token-auth-file="$d/tokens.csv" \
    --service-account-key-file="$d/sa.pub" \
    --service-account-signing-key-file="$d/sa.key" \
    --service-account-issuer="$server" \
    --service-cluster-ip-range="${svc_cidr[$c]}" \
    --authorization-mode=RBAC \
    --enable-priority-and-fairness=false \
    --shutdown-watch-termination-grace-period=2s \
    --profiling=false
  stack_set_ready "$c-apiserver" "$server/readyz" --cacert "$d/ca.crt" -H "Authorization: Bearer ${token[$c]}"
  i=$((i + 1))
done
for c in "${clusters[@]}"; do
  stack_wait_ready "$c-apiserver" "$timeout"
  stack_log "$c ready after $((SECONDS - started))s"
done

for c in "${clusters[@]}"; do
  wants_kcm "$c" || continue
  d=$STACK_DIR/$c
  stack_log "starting kube-controller-manager of $c"
  stack_start "$c-kcm" "$STACK_BIN/kube-controller-manager" \
    --kubeconfig="$d/kubeconfig" \
    --authentication-kubeconfig="$d/kubeconfig" \
    --authorization-kubeconfig="$d/kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${kcm_port[$c]}" \
    --cert-dir="$d/kcm-certs" \
    --controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token \
    --leader-elect=false \
    --service-account-private-key-file="$d/sa.key" \
    --root-ca-file="$d/ca.crt" \
    --profiling=false
  stack_set_ready "$c-kcm" "https://127.0.0.1:${kcm_port[$c]}/healthz" -k
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
  wants_kcm "$c" || continue
  stack_wait_ready "$c-kcm" "$timeout"
done

env_tmp=$STACK_DIR/env.tmp
{
  printf "STACK_DIR='%s'\n" "$STACK_DIR"
  printf "STACK_BIN='%s'\n" "$STACK_BIN"
  printf "STACK_CLUSTERS='%s'\n" "${clusters[*]}"
  printf "STACK_MANAGEMENT='%s'\n" "${clusters[0]}"
  printf "ETCD_ENDPOINT='%s'\n" "$etcd_url"
  for c in "${clusters[@]}"; do
    d=$STACK_DIR/$c
    crd=false kcm=false
    wants_peer_crd "$c" && crd=true
    wants_kcm "$c" && kcm=true
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
  done
} >"$env_tmp"
mv "$env_tmp" "$STACK_DIR/env"
stack_log "stack up in $((SECONDS - started))s; env in $STACK_DIR/env; stop with test/stack/down.sh"
cat "$STACK_DIR/env"
