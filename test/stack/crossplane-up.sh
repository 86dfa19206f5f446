#!/usr/bin/env bash
# Installs kilomesh on a stack started by up.sh the way the documentation
# tells users to, on Crossplane as its Helm chart runs it, without a kubelet:
#
#   test/stack/up.sh && test/stack/crossplane-up.sh
#
# A loopback OCI registry holds the packages under their production paths
# (function-kilomesh and provider-kilomesh as multi-platform indexes);
# ImageConfigs point xpkg.crossplane.io/kilomesh/ and
# xpkg.crossplane.io/crossplane-contrib/ at it. Crossplane core runs outside
# the cluster against the management cluster, with the Deployment runtime
# for providers and the External runtime for functions; Crossplane's RBAC
# manager runs as the chart runs it (rbac init, then rbac start
# --provider-clusterrole=crossplane:allowed-provider-permissions, with
# leader election), in a network namespace of its own. runtime.sh runs as
# the process package-runtime: it plays the pods of the packages' runtime
# (see runtime.sh). Then the shell blocks of docs/install.md that install
# the Configuration run as they are: the control-plane grant of
# examples/provider/control-plane-rbac.yaml and
#
#   crossplane xpkg install configuration xpkg.crossplane.io/kilomesh/configuration-kilomesh:v0.2.0
#
# and Crossplane's package manager resolves and installs the Function and
# both Providers.
#
# Environment (besides lib.sh's):
#   STACK_VERSION    the version this tree's packages are built and
#                    installed as (default v0.2.0)
#   STACK_NO_BUILD=1 push what package/build.sh wrote into _output as it is
#   STACK_TIMEOUT    seconds to wait for each step (default 120)
#   STACK_CROSSPLANE_ARGS  extra flags for `crossplane core start`, split at
#                    spaces, e.g. "--circuit-breaker-burst=1000" (default
#                    none: Crossplane's defaults, what users get)
#
# On a stack with real nodes (up.sh with STACK_REAL_NODES=1) Crossplane is
# installed as users install it instead: its own Helm chart (of
# test/tools/crossplane's version, from the Go module cache; webhooks on,
# default values but its image, which crossplane-image.sh builds) on the
# management cluster's node, the registry reachable from that node at
# <node IP>:<port> as a mirror of xpkg.crossplane.io (docs/install.md's
# mirror block), and the packages' runtimes as the Deployments Crossplane
# makes (providers and the function), pulled by the node's containerd;
# runtime.sh and the RBAC manager process are not used.
# STACK_CROSSPLANE_NAMESPACE installs Crossplane into another namespace
# than crossplane-system (real nodes only).
#
# Every process is started with stack_start, so down.sh stops exactly them.
# Appends the addresses of what it started to $STACK_DIR/env (see README.md).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

stack_env_load
mgmt=$STACK_MANAGEMENT
timeout=${STACK_TIMEOUT:-120}
ns=${STACK_CROSSPLANE_NAMESPACE:-crossplane-system}
version=${STACK_VERSION:-v0.2.0}
started=$SECONDS

kc() { stack_kubectl "$mgmt" "$@"; }

for name in registry crossplane rbac-manager package-runtime function-kilomesh provider-kubernetes provider-kilomesh; do
  if pid=$(stack_running "$name"); then
    stack_die "$name is already running (pid $pid); stop the stack with test/stack/down.sh first"
  fi
done

[ "$ns" = crossplane-system ] || [ "${STACK_REAL_NODES:-}" = 1 ] ||
  stack_die "STACK_CROSSPLANE_NAMESPACE needs real nodes (STACK_REAL_NODES=1)"
if [ "${STACK_NO_BUILD:-}" != 1 ]; then
  stack_log "building Crossplane, crane and provider-kubernetes (skipped when up to date; the first build takes minutes)"
  "$STACK_TOP/test/tools/build.sh" crossplane crossplane-cli crane provider-kubernetes
  [ "${STACK_REAL_NODES:-}" != 1 ] || "$STACK_TOP/test/tools/build.sh" helm
  for p in function provider configuration provider-kubernetes; do
    stack_log "building the $p package"
    VERSION=$version "$STACK_TOP/package/build.sh" "$p" >/dev/null
  done
fi
for b in "$STACK_BIN/crossplane" "$STACK_BIN/crossplane-core" "$STACK_BIN/crane"; do
  [ -x "$b" ] || stack_die "missing $b"
done
read -r xp_module xp_version < <(cd "$STACK_TOP/test/tools/crossplane" && go list -m -f '{{.Dir}} {{.Version}}' github.com/crossplane/crossplane/v2)
xp_crds=$xp_module/cluster/crds
[ -d "$xp_crds" ] || stack_die "cannot find Crossplane's CRDs in $xp_crds"

read -r -a ports <<<"$(stack_free_ports 10)"
reg_port=${ports[0]} xp_metrics=${ports[1]} xp_health=${ports[2]}
fn_port=${ports[3]} fn_metrics=${ports[4]}
pk_webhook=${ports[5]} pk_metrics=${ports[6]} pk_health=${ports[7]}
pkm_metrics=${ports[8]} pkm_health=${ports[9]}
registry=127.0.0.1:$reg_port
mgmt_port_var=$(stack_var "$mgmt" PORT)

# The env file gets the addresses of what this script starts.
env_tmp=$STACK_DIR/env.tmp
{
  grep -v -E '^(REGISTRY|CROSSPLANE|FUNCTION|PROVIDER_KUBERNETES|PROVIDER_KILOMESH|KILOMESH)_' "$STACK_DIR/env"
  printf "%s='%s'\n" \
    REGISTRY_ADDRESS "$registry" \
    CROSSPLANE_NAMESPACE "$ns" \
    KILOMESH_VERSION "$version"
  # With real nodes, Crossplane and the packages run in pods: nothing of
  # theirs listens on the host.
  [ "${STACK_REAL_NODES:-}" = 1 ] || printf "%s='%s'\n" \
    CROSSPLANE_METRICS_PORT "$xp_metrics" \
    CROSSPLANE_HEALTH_PORT "$xp_health" \
    FUNCTION_KILOMESH_ADDRESS "127.0.0.1:$fn_port" \
    FUNCTION_KILOMESH_METRICS "127.0.0.1:$fn_metrics" \
    PROVIDER_KUBERNETES_WEBHOOK "$pk_webhook" \
    PROVIDER_KUBERNETES_METRICS "127.0.0.1:$pk_metrics" \
    PROVIDER_KUBERNETES_HEALTH "127.0.0.1:$pk_health" \
    PROVIDER_KILOMESH_METRICS "127.0.0.1:$pkm_metrics" \
    PROVIDER_KILOMESH_HEALTH "127.0.0.1:$pkm_health"
} >"$env_tmp"
mv "$env_tmp" "$STACK_DIR/env"
stack_env_load
rm -rf "$STACK_DIR/runtime" "$STACK_DIR/identities"

# --- the registry, and the packages in it under their production paths ---
stack_log "starting an OCI registry on $registry"
mkdir -p "$STACK_DIR/registry"
stack_start registry "$STACK_BIN/crane" registry serve --address "$registry" --disk "$STACK_DIR/registry"
stack_set_ready registry "http://$registry/v2/"
stack_wait_ready registry "$timeout"
VERSION=$version "$STACK_TOP/package/push.sh" "$registry" function provider configuration provider-kubernetes >/dev/null
stack_log "pushed kilomesh $version and provider-kubernetes to $registry"

if [ "${STACK_REAL_NODES:-}" = 1 ]; then
  node_ip_var=$(stack_var "$mgmt" NODE_IP)
  node_registry=${!node_ip_var}:$reg_port
  stack_log "the registry for $mgmt's node and its pods at $node_registry"
  "$STACK_TOP/test/stack/node.sh" registry "$mgmt" "$reg_port"
  printf "REGISTRY_NODE_ADDRESS='%s'\n" "$node_registry" >>"$STACK_DIR/env"

  xp_image=$(STACK_NO_BUILD=1 "$STACK_TOP/test/stack/crossplane-image.sh" crossplane)
  read -r xp_version xp_chart <<<"$xp_image"
  stack_log "helm install crossplane (the chart of Crossplane $xp_version; image stack.local/crossplane:$xp_version)"
  mkdir -p "$STACK_DIR/helm"
  HELM_CACHE_HOME=$STACK_DIR/helm/cache HELM_CONFIG_HOME=$STACK_DIR/helm/config HELM_DATA_HOME=$STACK_DIR/helm/data \
    KUBECONFIG=$STACK_DIR/$mgmt/kubeconfig "$STACK_BIN/helm" install crossplane "$xp_chart" \
    --namespace "$ns" --create-namespace \
    --set image.repository=stack.local/crossplane --set "image.tag=$xp_version" \
    --wait --timeout "${timeout}s" >"$STACK_DIR/logs/helm-install.log" 2>&1 ||
    { tail -n 20 "$STACK_DIR/logs/helm-install.log" >&2; stack_die "helm install crossplane failed"; }
  kc -n "$ns" rollout status deployment/crossplane deployment/crossplane-rbac-manager --timeout="${timeout}s" >/dev/null

  # The registry at the node's address in place of xpkg.crossplane.io: a
  # mirror, as docs/install.md's mirror block has it (it also gives the
  # mirrored provider-kilomesh its runtime config, which Crossplane looks
  # up by the image it pulls), and the same for crossplane-contrib.
  stack_log "docs/install.md: the registry at $node_registry as a mirror of xpkg.crossplane.io/kilomesh"
  stack_doc_run docs/install.md mirror "mirror=$node_registry/kilomesh" >/dev/null
  kc apply -f - >/dev/null <<YAML
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: crossplane-contrib-node-registry
spec:
  matchImages:
  - type: Prefix
    prefix: xpkg.crossplane.io/crossplane-contrib/
  rewriteImage:
    prefix: $node_registry/crossplane-contrib/
YAML
  stack_log "docs/install.md: the grant of provider-kilomesh in the control plane (Crossplane in $ns)"
  stack_doc_run docs/install.md control-plane-grant "xp_ns=$ns" >/dev/null
  stack_log "docs/install.md: crossplane xpkg install configuration xpkg.crossplane.io/kilomesh/configuration-kilomesh:$version"
  stack_doc_run docs/install.md install-configuration "version=$version" >/dev/null
  stack_wait_for "$timeout" "the CRDs of the managed resources" kc get crd \
    objects.kubernetes.m.crossplane.io providerconfigs.kubernetes.m.crossplane.io \
    nodeinventories.kube.kilomesh.io peersets.kube.kilomesh.io
  stack_log "kilomesh installed on $mgmt's node in $((SECONDS - started))s"
  kc -n "$ns" get pods -o wide >&2
  exit 0
fi

# --- Crossplane core and its RBAC manager ---
xp=$STACK_DIR/crossplane
mkdir -p "$xp/tls/client" "$xp/xpkg"
kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null
# Crossplane's own ServiceAccount, as the chart creates it: the Deployment
# runtime copies its image pull secrets to the packages' ServiceAccounts.
kc -n "$ns" create serviceaccount crossplane --dry-run=client -o yaml | kc apply -f - >/dev/null
stack_log "crossplane core init"
for attempt in 1 2 3 4 5; do
  # The first run can fail with "no matches for kind Lock" while the CRD it
  # just created is not served yet.
  if KUBECONFIG=$STACK_DIR/$mgmt/kubeconfig ENABLE_WEBHOOKS=false \
    "$STACK_BIN/crossplane-core" core init \
    --namespace="$ns" \
    --cr-ds-path="$xp_crds" \
    --tlsca-secret-name=crossplane-root-ca \
    --tls-client-secret-name=crossplane-tls-client \
    >"$STACK_DIR/logs/crossplane-init.log" 2>&1; then
    break
  fi
  [ "$attempt" -lt 5 ] || { tail -n 20 "$STACK_DIR/logs/crossplane-init.log" >&2; stack_die "crossplane core init failed"; }
  sleep 1
done
secret_file() { kc -n "$ns" get secret "$1" -o "go-template={{index .data \"$2\" | base64decode}}"; }
(
  umask 077
  for f in tls.crt tls.key ca.crt; do secret_file crossplane-tls-client "$f" >"$xp/tls/client/$f"; done
  secret_file crossplane-root-ca tls.crt >"$xp/ca.crt"
  secret_file crossplane-root-ca tls.key >"$xp/ca.key"
)

stack_log "crossplane rbac init; starting Crossplane's RBAC manager"
KUBECONFIG=$STACK_DIR/$mgmt/kubeconfig "$STACK_BIN/crossplane-core" rbac init >"$STACK_DIR/logs/rbac-init.log" 2>&1 ||
  { tail -n 20 "$STACK_DIR/logs/rbac-init.log" >&2; stack_die "crossplane rbac init failed"; }
# The ClusterRole the chart names in --provider-clusterrole: it aggregates
# what an administrator allows providers beyond their own types.
kc apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: crossplane:allowed-provider-permissions
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      rbac.crossplane.io/aggregate-to-allowed-provider-permissions: "true"
YAML
stack_netns_start rbac-manager "${!mgmt_port_var}" "$ns" env KUBECONFIG="$STACK_DIR/$mgmt/kubeconfig" LEADER_ELECTION=true \
  "$STACK_BIN/crossplane-core" rbac start --provider-clusterrole=crossplane:allowed-provider-permissions

stack_log "starting Crossplane core $xp_version (Deployment runtime for providers, External for functions)"
# shellcheck disable=SC2086 # STACK_CROSSPLANE_ARGS is split on purpose
stack_start crossplane env KUBECONFIG="$STACK_DIR/$mgmt/kubeconfig" ENABLE_WEBHOOKS=false \
  "$STACK_BIN/crossplane-core" core start \
  --namespace="$ns" \
  --package-runtime='Provider=Deployment;Function=External' \
  --tls-client-certs-dir="$xp/tls/client" \
  --tls-client-secret-name=crossplane-tls-client \
  --xpkg-cache-dir="$xp/xpkg" \
  --metrics-port="$xp_metrics" \
  --health-probe-port="$xp_health" \
  ${STACK_CROSSPLANE_ARGS:-}
stack_set_ready crossplane "http://127.0.0.1:$xp_health/readyz"
stack_wait_ready crossplane "$timeout"

# --- the registry in place of xpkg.crossplane.io ---
# Crossplane looks up a package's runtime config by the image it pulls, so
# the ImageConfig of control-plane-rbac.yaml, which matches the production
# path, gets a twin for the loopback path.
kc apply -f - >/dev/null <<YAML
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: kilomesh-loopback-registry
spec:
  matchImages:
  - type: Prefix
    prefix: xpkg.crossplane.io/kilomesh/
  rewriteImage:
    prefix: $registry/kilomesh/
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: crossplane-contrib-loopback-registry
spec:
  matchImages:
  - type: Prefix
    prefix: xpkg.crossplane.io/crossplane-contrib/
  rewriteImage:
    prefix: $registry/crossplane-contrib/
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: provider-kilomesh-runtime-loopback
spec:
  matchImages:
  - type: Prefix
    prefix: $registry/kilomesh/provider-kilomesh
  runtime:
    configRef:
      name: provider-kilomesh
YAML

stack_log "starting the package runtime's stand-in (runtime.sh --watch)"
stack_start package-runtime "$STACK_TOP/test/stack/runtime.sh" --watch

# --- what docs/install.md tells users to run ---
stack_log "docs/install.md: the grant of provider-kilomesh in the control plane"
stack_doc_run docs/install.md control-plane-grant >/dev/null
stack_log "docs/install.md: crossplane xpkg install configuration xpkg.crossplane.io/kilomesh/configuration-kilomesh:$version"
stack_doc_run docs/install.md install-configuration "version=$version" >/dev/null
stack_wait_for "$timeout" "the CRDs of the managed resources" kc get crd \
  objects.kubernetes.m.crossplane.io providerconfigs.kubernetes.m.crossplane.io \
  nodeinventories.kube.kilomesh.io peersets.kube.kilomesh.io
stack_env_load
stack_log "kilomesh installed in $((SECONDS - started))s: $FUNCTION_KILOMESH_REVISION $PROVIDER_KUBERNETES_REVISION $PROVIDER_KILOMESH_REVISION"
