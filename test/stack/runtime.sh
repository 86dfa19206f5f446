#!/usr/bin/env bash
# Plays, on a stack without a kubelet, the part of Crossplane's package
# runtime that happens in pods: it runs each package Crossplane installed
# for kilomesh as a local process, from the binary in the package's own
# image, under the identity Crossplane gives it, and keeps every process on
# the ACTIVE revision of its package -- an upgrade moves it to the new one.
#
#   test/stack/runtime.sh           bring the processes in line once, and
#                                   wait until every package is HEALTHY
#   test/stack/runtime.sh --watch   keep doing it, every 2 s, until stopped
#                                   (crossplane-up.sh runs it as the process
#                                   package-runtime)
#
# Providers (provider-kubernetes, provider-kilomesh) run on Crossplane's
# Deployment runtime: Crossplane itself creates each revision's
# ServiceAccount (named by the revision's DeploymentRuntimeConfig, else
# after the revision), Deployment, Service and TLS Secrets, and its RBAC
# manager binds the revision's ClusterRole to that ServiceAccount. For the
# active revision this script extracts the binary from the revision's image
# in the registry, reads the ServiceAccount from the Deployment Crossplane
# made, runs the binary with a kubeconfig holding a TokenRequest token of
# it (and the TLS Secret Crossplane made, for provider-kubernetes' webhook),
# and, once the process is ready, reports the Deployment available in its
# status -- what the deployment controller would write once the pod is
# ready. Crossplane then marks the revision healthy itself.
#
# function-kilomesh runs on the External runtime: with the Deployment
# runtime Crossplane would call the function at its Service's cluster DNS
# name, which does not resolve here. For its active revision this script
# does what the Deployment runtime would: a ServiceAccount named after the
# revision and owned by it (bound to nothing: Crossplane grants functions no
# permissions), a TLS Secret <package>-tls-server signed by Crossplane's CA,
# the revision's status.tlsServerSecretName and status.endpoint, and the
# RuntimeHealthy condition once the process is ready.
#
# A process of the active revision that is stopped (down.sh NAME) stays
# stopped: start.sh NAME brings it back. The process of a package that is
# uninstalled stops. Tokens last STACK_TOKEN_TTL (default 48h).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

stack_env_load
mgmt=$STACK_MANAGEMENT
ns=$CROSSPLANE_NAMESPACE
timeout=${STACK_TIMEOUT:-120}
rt=$STACK_DIR/runtime
mkdir -p "$rt" "$STACK_DIR/identities"
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac

kc() { stack_kubectl "$mgmt" "$@"; }

# env_set KEY VALUE replaces KEY in the env file.
env_set() {
  local tmp
  tmp=$(mktemp "$STACK_DIR/.env.XXXXXX")
  { grep -v "^$1=" "$STACK_DIR/env" || true; printf "%s='%s'\n" "$1" "$2"; } >"$tmp"
  mv "$tmp" "$STACK_DIR/env"
}

# extract IMAGE DIR writes the entrypoint of IMAGE (for this machine's
# platform) into DIR and prints its path.
extract() {
  local image=$1 dir=$2 entry
  entry=$("$STACK_BIN/crane" --platform "linux/$arch" config "$image" | jq -r '.config.Entrypoint[0]')
  if [ -z "$entry" ] || [ "$entry" = null ]; then echo "$image has no entrypoint" >&2; return 1; fi
  mkdir -p "$dir"
  "$STACK_BIN/crane" --platform "linux/$arch" export "$image" - | tar -x -C "$dir" "${entry#/}"
  printf '%s\n' "$dir$entry"
}

# identity PROCESS SERVICEACCOUNT writes a kubeconfig of the management
# cluster holding a TokenRequest token of the ServiceAccount, and prints
# its path.
identity() {
  local out=$STACK_DIR/identities/$1.kubeconfig token server
  server=$(stack_var "$mgmt" SERVER)
  token=$(kc -n "$ns" create token "$2" --duration="${STACK_TOKEN_TTL:-48h}")
  stack_write_kubeconfig "$out" "$2@$mgmt" "$mgmt" "${!server}" \
    "$STACK_DIR/$mgmt/ca.crt" "system:serviceaccount:$ns:$2" "$token"
  printf '%s\n' "$out"
}

# function_runtime REVISION UID PROCESS PACKAGE: the identity and TLS of a
# function revision, as the Deployment runtime would give them.
function_runtime() {
  local rev=$1 uid=$2 proc=$3 pkg=$4
  local tls=$STACK_DIR/runtime/$proc/tls
  kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata:
  name: $rev
  namespace: $ns
  ownerReferences:
  - apiVersion: pkg.crossplane.io/v1
    kind: FunctionRevision
    name: $rev
    uid: $uid
    controller: true
    blockOwnerDeletion: true
YAML
  mkdir -p "$tls"
  (
    cd "$tls"
    umask 077
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout tls.key -out tls.csr -subj "/CN=$pkg" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:$pkg.$ns.svc" "extendedKeyUsage=serverAuth,clientAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >tls.ext
    openssl x509 -req -sha256 -days 3650 -in tls.csr -CA "$STACK_DIR/crossplane/ca.crt" -CAkey "$STACK_DIR/crossplane/ca.key" \
      -set_serial "0x$(openssl rand -hex 8)" -extfile tls.ext -out tls.crt 2>/dev/null
    cp "$STACK_DIR/crossplane/ca.crt" ca.crt
    rm -f tls.csr tls.ext
  )
  kc -n "$ns" create secret generic "$pkg-tls-server" --type=kubernetes.io/tls \
    --from-file=tls.crt="$tls/tls.crt" --from-file=tls.key="$tls/tls.key" --from-file=ca.crt="$tls/ca.crt" \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
  kc patch functionrevisions.pkg.crossplane.io "$rev" --subresource=status --type=merge \
    -p "{\"status\":{\"tlsServerSecretName\":\"$pkg-tls-server\",\"endpoint\":\"$FUNCTION_KILOMESH_ADDRESS\"}}" >/dev/null
}

# provider_deployment UID prints the name and ServiceAccount of the
# Deployment Crossplane made for the provider revision of that UID.
provider_deployment() {
  kc -n "$ns" get deployments -o json |
    jq -r --arg uid "$1" '.items[] | select(any(.metadata.ownerReferences[]?; .uid == $uid))
      | "\(.metadata.name) \(.spec.template.spec.serviceAccountName)"' | head -n1
}

# tls_from_secret SECRET DIR copies a TLS Secret Crossplane made into DIR.
tls_from_secret() {
  local s=$1 dir=$2 k
  mkdir -p "$dir"
  for k in tls.crt tls.key ca.crt; do
    (umask 077; kc -n "$ns" get secret "$s" -o "go-template={{index .data \"$k\" | base64decode}}" >"$dir/$k")
  done
  [ -s "$dir/tls.crt" ]
}

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }

# sync_package PROCESS PACKAGE KIND REVISIONS makes PROCESS serve the
# active revision of the package, given every revision of the cluster (a
# list as JSON). It returns 1 while there is nothing to serve yet, or when
# something is not ready.
sync_package() {
  local proc=$1 pkg=$2 kind=$3 revs rev uid image bin kcfg dep sa tls
  revs=$(jq --arg p "$pkg" --arg k "${kind^}Revision" \
    '{items: [.items[] | select(.kind == $k and .metadata.labels["pkg.crossplane.io/package"] == $p)]}' <<<"$4")
  rev=$(jq -r '[.items[] | select(.spec.desiredState == "Active")] | if length == 1 then .[0].metadata.name else "" end' <<<"$revs")
  if [ -z "$rev" ]; then
    # The package is gone (uninstalled): its Deployment would be too.
    if [ -f "$rt/$proc.revision" ] && [ "$(jq '.items | length' <<<"$revs")" = 0 ]; then
      stack_log "$proc: package $pkg uninstalled, stopping"
      stack_stop "$proc"
      rm -f "$rt/$proc.revision"
    fi
    return 1
  fi
  [ "$(cat "$rt/$proc.revision" 2>/dev/null)" != "$rev" ] || return 0
  uid=$(jq -r --arg r "$rev" '.items[] | select(.metadata.name == $r) | .metadata.uid' <<<"$revs")
  image=$(jq -r --arg r "$rev" '.items[] | select(.metadata.name == $r) | .status.resolvedImage // ""' <<<"$revs")
  [ -n "$image" ] || return 1
  if [ "$kind" = provider ]; then
    read -r dep sa <<<"$(provider_deployment "$uid")"
    [ -n "${sa:-}" ] || return 1
    tls=$STACK_DIR/runtime/$proc/tls
    tls_from_secret "$pkg-tls-server" "$tls" 2>/dev/null || return 1
  else
    sa=$rev
  fi

  stack_log "$proc: serving revision $rev ($image) as ServiceAccount $ns/$sa"
  stack_stop "$proc"
  bin=$(extract "$image" "$rt/$rev") || return 1
  [ "$kind" = provider ] || function_runtime "$rev" "$uid" "$proc" "$pkg"
  kcfg=$(identity "$proc" "$sa")
  case "$proc" in
    function-kilomesh)
      stack_start "$proc" env KUBECONFIG="$kcfg" "$bin" \
        --address="$FUNCTION_KILOMESH_ADDRESS" \
        --tls-certs-dir="$STACK_DIR/runtime/$proc/tls" \
        --metrics-address="$FUNCTION_KILOMESH_METRICS"
      stack_set_ready "$proc" "http://$FUNCTION_KILOMESH_METRICS/metrics"
      ;;
    provider-kubernetes)
      stack_start "$proc" env KUBECONFIG="$kcfg" TLS_SERVER_CERTS_DIR="$tls" POD_NAMESPACE="$ns" "$bin" \
        --webhook-port="$PROVIDER_KUBERNETES_WEBHOOK" \
        --metrics-bind-address="$PROVIDER_KUBERNETES_METRICS" \
        --health-probe-bind-addr="$PROVIDER_KUBERNETES_HEALTH"
      stack_set_ready "$proc" "http://$PROVIDER_KUBERNETES_HEALTH/readyz"
      ;;
    provider-kilomesh)
      stack_start "$proc" env KUBECONFIG="$kcfg" POD_NAMESPACE="$ns" "$bin" \
        --metrics-bind-address="$PROVIDER_KILOMESH_METRICS" \
        --health-probe-bind-address="$PROVIDER_KILOMESH_HEALTH"
      stack_set_ready "$proc" "http://$PROVIDER_KILOMESH_HEALTH/readyz"
      ;;
  esac
  (stack_wait_ready "$proc" "$timeout") || return 1

  if [ "$kind" = provider ]; then
    local t
    t=$(now)
    kc -n "$ns" patch deployment "$dep" --subresource=status --type=merge -p "{\"status\":{
      \"replicas\":1,\"updatedReplicas\":1,\"readyReplicas\":1,\"availableReplicas\":1,
      \"conditions\":[{\"type\":\"Available\",\"status\":\"True\",\"reason\":\"MinimumReplicasAvailable\",
        \"message\":\"Deployment has minimum availability.\",\"lastTransitionTime\":\"$t\",\"lastUpdateTime\":\"$t\"}]}}" >/dev/null
  else
    kc patch functionrevisions.pkg.crossplane.io "$rev" --subresource=status --type=json -p "[{\"op\":\"add\",\"path\":\"/status/conditions/-\",
      \"value\":{\"type\":\"RuntimeHealthy\",\"status\":\"True\",\"reason\":\"HealthyPackageRevision\",\"lastTransitionTime\":\"$(now)\"}}]" >/dev/null
  fi
  printf '%s\n' "$rev" >"$rt/$proc.revision"
  env_set "$(stack_var "$proc" REVISION)" "$rev"
}

# The processes, the packages Crossplane names after their references, and
# their kinds.
packages=(
  "function-kilomesh kilomesh-function-kilomesh function"
  "provider-kubernetes crossplane-contrib-provider-kubernetes provider"
  "provider-kilomesh kilomesh-provider-kilomesh provider"
)

sync_all() {
  local p ok=0 revs
  revs=$(kc get functionrevisions.pkg.crossplane.io,providerrevisions.pkg.crossplane.io -o json) || return 1
  for p in "${packages[@]}"; do
    # shellcheck disable=SC2086 # three words
    sync_package $p "$revs" || ok=1
  done
  return "$ok"
}

if [ "${1:-}" = --watch ]; then
  while :; do
    sync_all || true
    sleep 2
  done
fi

deadline=$((SECONDS + timeout))
until sync_all; do
  [ "$SECONDS" -lt "$deadline" ] || stack_die "the packages' processes are not running after ${timeout}s (kubectl get providers.pkg.crossplane.io,functions,providerrevisions,functionrevisions)"
  sleep 1
done
stack_wait_for "$timeout" "the packages to become healthy" kc wait --for=condition=Healthy --timeout=1s \
  functions.pkg.crossplane.io/kilomesh-function-kilomesh providers.pkg.crossplane.io/kilomesh-provider-kilomesh \
  providers.pkg.crossplane.io/crossplane-contrib-provider-kubernetes
