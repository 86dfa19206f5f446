#!/usr/bin/env bash
# Installs kilomesh, the way a user does, on a stack started by up.sh: a
# loopback OCI registry, Crossplane core running outside the cluster against
# the management cluster, and provider-kubernetes, provider-kilomesh and
# function-kilomesh as local processes that Crossplane's External package
# runtime uses. The Configuration is installed with
#
#   crossplane xpkg install configuration xpkg.crossplane.io/kilomesh/configuration-kilomesh:v0.1.0
#
# and Crossplane's package manager resolves and installs its Function and
# Providers from the loopback registry, where ImageConfigs redirect the
# packages' production references.
#
#   test/stack/up.sh && test/stack/crossplane-up.sh
#
# Environment (besides lib.sh's):
#   STACK_PACKAGES   folder where package/build.sh writes the packages and
#                    binaries, <package>/<name>-<version>.xpkg and
#                    <package>/<name> (default _output at the top of the
#                    repository)
#   STACK_NO_BUILD=1 use what is in STACK_PACKAGES and .cache/bin as it is
#   STACK_TIMEOUT    seconds to wait for each step (default 120)
#   STACK_CROSSPLANE_ARGS  extra flags for `crossplane core start`, split at
#                    spaces, e.g. "--circuit-breaker-burst=1000" (default
#                    none: Crossplane's defaults, what users get)
#
# Every process is started with stack_start, so down.sh stops exactly them.
# Appends the addresses of what it started to $STACK_DIR/env (see README.md).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

stack_env_load
mgmt=$STACK_MANAGEMENT
timeout=${STACK_TIMEOUT:-120}
pkgdir=${STACK_PACKAGES:-$STACK_TOP/_output}
ns=crossplane-system
xp_version=v2.4.2
started=$SECONDS

# Packages: the references users install, and the files package/build.sh writes.
org_kilomesh=xpkg.crossplane.io/kilomesh
org_contrib=xpkg.crossplane.io/crossplane-contrib
version=v0.1.0
pk_version=v1.3.1
configuration_ref=$org_kilomesh/configuration-kilomesh:$version
declare -A pkg_file=(
  [configuration-kilomesh]=$pkgdir/configuration/configuration-kilomesh-$version.xpkg
  [function-kilomesh]=$pkgdir/function/function-kilomesh-$version.xpkg
  [provider-kilomesh]=$pkgdir/provider/provider-kilomesh-$version.xpkg
  [provider-kubernetes]=$pkgdir/provider-kubernetes/provider-kubernetes-$pk_version.xpkg
)
declare -A pkg_path=(
  [configuration-kilomesh]=kilomesh/configuration-kilomesh:$version
  [function-kilomesh]=kilomesh/function-kilomesh:$version
  [provider-kilomesh]=kilomesh/provider-kilomesh:$version
  [provider-kubernetes]=crossplane-contrib/provider-kubernetes:$pk_version
)
# The names Crossplane gives the dependencies (from their references).
fn_pkg=kilomesh-function-kilomesh
pkm_pkg=kilomesh-provider-kilomesh
pk_pkg=crossplane-contrib-provider-kubernetes

kc() { stack_kubectl "$mgmt" "$@"; }

for name in registry crossplane function-kilomesh provider-kubernetes provider-kilomesh; do
  if pid=$(stack_running "$name"); then
    stack_die "$name is already running (pid $pid); stop the stack with test/stack/down.sh first"
  fi
done

if [ "${STACK_NO_BUILD:-}" != 1 ]; then
  stack_log "building Crossplane, crane and provider-kubernetes (skipped when up to date; the first build takes minutes)"
  "$STACK_TOP/test/tools/build.sh" crossplane crossplane-cli crane provider-kubernetes
  for p in function provider configuration provider-kubernetes; do
    stack_log "building the $p package"
    VERSION=$version "$STACK_TOP/package/build.sh" "$p" >/dev/null
  done
fi
for p in "${!pkg_file[@]}"; do
  [ -f "${pkg_file[$p]}" ] || stack_die "no package ${pkg_file[$p]} (run package/build.sh)"
done
# The local processes run the very binaries the packages' images hold.
fn_bin=$pkgdir/function/function-kilomesh
pkm_bin=$pkgdir/provider/provider-kilomesh
pk_bin=$pkgdir/provider-kubernetes/provider-kubernetes
for b in "$fn_bin" "$pkm_bin" "$pk_bin" "$STACK_BIN/crossplane" "$STACK_BIN/crossplane-core" "$STACK_BIN/crane"; do
  [ -x "$b" ] || stack_die "missing $b"
done
xp_crds=$(cd "$STACK_TOP/test/tools/crossplane" && go list -m -f '{{.Dir}}' github.com/crossplane/crossplane/v2)/cluster/crds
[ -d "$xp_crds" ] || stack_die "cannot find Crossplane's CRDs in $xp_crds"

read -r -a ports <<<"$(stack_free_ports 10)"
reg_port=${ports[0]} xp_metrics=${ports[1]} xp_health=${ports[2]}
fn_port=${ports[3]} fn_metrics=${ports[4]}
pk_webhook=${ports[5]} pk_metrics=${ports[6]} pk_health=${ports[7]}
pkm_metrics=${ports[8]} pkm_health=${ports[9]}
registry=127.0.0.1:$reg_port

# --- the registry, and the packages in it under their production paths ---
stack_log "starting an OCI registry on $registry"
mkdir -p "$STACK_DIR/registry"
stack_start registry "$STACK_BIN/crane" registry serve --address "$registry" --disk "$STACK_DIR/registry"
stack_set_ready registry "http://$registry/v2/"
stack_wait_ready registry "$timeout"
for p in "${!pkg_file[@]}"; do
  "$STACK_BIN/crossplane" xpkg push -f "${pkg_file[$p]}" "$registry/${pkg_path[$p]}" >/dev/null
done
stack_log "pushed ${#pkg_file[@]} packages to $registry"

# --- Crossplane core ---
xp=$STACK_DIR/crossplane
mkdir -p "$xp/tls/client" "$xp/xpkg"
kc create namespace "$ns" --dry-run=client -o yaml | kc apply -f - >/dev/null
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

stack_log "starting Crossplane core $xp_version (External package runtime)"
# shellcheck disable=SC2086 # STACK_CROSSPLANE_ARGS is split on purpose
stack_start crossplane env KUBECONFIG="$STACK_DIR/$mgmt/kubeconfig" ENABLE_WEBHOOKS=false \
  "$STACK_BIN/crossplane-core" core start \
  --namespace="$ns" \
  --package-runtime=External \
  --tls-client-certs-dir="$xp/tls/client" \
  --tls-client-secret-name=crossplane-tls-client \
  --xpkg-cache-dir="$xp/xpkg" \
  --metrics-port="$xp_metrics" \
  --health-probe-port="$xp_health" \
  ${STACK_CROSSPLANE_ARGS:-}
stack_set_ready crossplane "http://127.0.0.1:$xp_health/readyz"
stack_wait_ready crossplane "$timeout"

# --- certificates for the local processes, signed by Crossplane's CA ---
# make_cert DIR CN SAN: tls.crt, tls.key and ca.crt (the CA) in DIR.
make_cert() {
  local d=$1 cn=$2 san=$3
  mkdir -p "$d"
  (
    cd "$d"
    umask 077
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout tls.key -out tls.csr -subj "/CN=$cn" 2>/dev/null
    printf '%s\n' "subjectAltName=$san" "extendedKeyUsage=serverAuth,clientAuth" \
      "keyUsage=critical,digitalSignature,keyEncipherment" >tls.ext
    openssl x509 -req -sha256 -days 3650 -in tls.csr -CA "$xp/ca.crt" -CAkey "$xp/ca.key" \
      -set_serial "0x$(openssl rand -hex 8)" -extfile tls.ext -out tls.crt 2>/dev/null
    cp "$xp/ca.crt" ca.crt
    rm -f tls.csr tls.ext
  )
}
# tls_secret NAME DIR stores a certificate folder as a Secret of Crossplane's namespace.
tls_secret() {
  kc -n "$ns" create secret generic "$1" --type=kubernetes.io/tls \
    --from-file=tls.crt="$2/tls.crt" --from-file=tls.key="$2/tls.key" --from-file=ca.crt="$2/ca.crt" \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
}
make_cert "$STACK_DIR/function-kilomesh/tls" function-kilomesh "IP:127.0.0.1,DNS:localhost,DNS:$fn_pkg.$ns.svc"
make_cert "$STACK_DIR/provider-kubernetes/tls" provider-kubernetes "IP:127.0.0.1,DNS:localhost,DNS:$pk_pkg.$ns.svc"
make_cert "$STACK_DIR/provider-kilomesh/tls" provider-kilomesh "IP:127.0.0.1,DNS:localhost,DNS:$pkm_pkg.$ns.svc"
tls_secret "$fn_pkg-tls-server" "$STACK_DIR/function-kilomesh/tls"
tls_secret "$pk_pkg-tls-server" "$STACK_DIR/provider-kubernetes/tls"
tls_secret "$pkm_pkg-tls-server" "$STACK_DIR/provider-kilomesh/tls"

# --- install the Configuration; the package manager does the rest ---
kc apply -f - >/dev/null <<YAML
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: kilomesh-loopback-registry
spec:
  matchImages:
  - type: Prefix
    prefix: $org_kilomesh/
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
    prefix: $org_contrib/
  rewriteImage:
    prefix: $registry/crossplane-contrib/
YAML
stack_log "crossplane xpkg install configuration $configuration_ref"
KUBECONFIG=$STACK_DIR/$mgmt/kubeconfig "$STACK_BIN/crossplane" xpkg install configuration "$configuration_ref" >/dev/null

# With the External runtime nobody runs the packages: every revision is told
# where its process listens and which Secret holds its certificate.
# revision_of KIND PACKAGE prints the name of the package's revision.
revision_of() {
  kc get "$1" -l "pkg.crossplane.io/package=$2" -o 'jsonpath={.items[0].metadata.name}' 2>/dev/null
}
# patch_revision KIND PACKAGE STATUS_JSON waits for the revision and patches its status.
patch_revision() {
  local kind=$1 pkg=$2 patch=$3 rev='' deadline=$((SECONDS + timeout))
  until rev=$(revision_of "$kind" "$pkg") && [ -n "$rev" ]; do
    [ "$SECONDS" -lt "$deadline" ] || stack_die "no $kind of $pkg after ${timeout}s (kubectl get configurations,providers.pkg.crossplane.io,functions -o wide)"
    sleep 0.5
  done
  kc patch "$kind" "$rev" --subresource=status --type=merge -p "$patch" >/dev/null
  printf '%s\n' "$rev"
}
fn_rev=$(patch_revision functionrevisions.pkg.crossplane.io "$fn_pkg" \
  "{\"status\":{\"tlsServerSecretName\":\"$fn_pkg-tls-server\",\"endpoint\":\"127.0.0.1:$fn_port\"}}")
pk_rev=$(patch_revision providerrevisions.pkg.crossplane.io "$pk_pkg" \
  "{\"status\":{\"tlsServerSecretName\":\"$pk_pkg-tls-server\"}}")
pkm_rev=$(patch_revision providerrevisions.pkg.crossplane.io "$pkm_pkg" \
  "{\"status\":{\"tlsServerSecretName\":\"$pkm_pkg-tls-server\"}}")
stack_log "revisions: $fn_rev $pk_rev $pkm_rev"

# wait_for DESCRIPTION COMMAND... retries COMMAND until it succeeds.
wait_for() {
  local what=$1 deadline=$((SECONDS + timeout))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || stack_die "$what not done after ${timeout}s"
    sleep 0.5
  done
}
wait_for "installing the revisions" kc wait --for=condition=RevisionHealthy --timeout=1s \
  "functionrevisions.pkg.crossplane.io/$fn_rev" "providerrevisions.pkg.crossplane.io/$pk_rev" "providerrevisions.pkg.crossplane.io/$pkm_rev"
wait_for "the CRDs of the managed resources" kc get crd \
  objects.kubernetes.m.crossplane.io providerconfigs.kubernetes.m.crossplane.io \
  nodeinventories.kube.kilomesh.io peersets.kube.kilomesh.io
wait_for "the ClusterMesh XRD" kc wait --for=condition=Established --timeout=1s xrd/clustermeshes.kilomesh.io

# --- the local processes the revisions point to ---
kcfg=$STACK_DIR/$mgmt/kubeconfig
stack_log "starting function-kilomesh on 127.0.0.1:$fn_port"
stack_start function-kilomesh "$fn_bin" \
  --address="127.0.0.1:$fn_port" \
  --tls-certs-dir="$STACK_DIR/function-kilomesh/tls" \
  --metrics-address="127.0.0.1:$fn_metrics"
stack_set_ready function-kilomesh "http://127.0.0.1:$fn_metrics/metrics"
stack_log "starting provider-kubernetes $pk_version"
stack_start provider-kubernetes env KUBECONFIG="$kcfg" TLS_SERVER_CERTS_DIR="$STACK_DIR/provider-kubernetes/tls" \
  "$pk_bin" \
  --webhook-port="$pk_webhook" \
  --metrics-bind-address="127.0.0.1:$pk_metrics" \
  --health-probe-bind-addr="127.0.0.1:$pk_health"
stack_set_ready provider-kubernetes "http://127.0.0.1:$pk_health/readyz"
stack_log "starting provider-kilomesh"
stack_start provider-kilomesh env KUBECONFIG="$kcfg" \
  "$pkm_bin" \
  --metrics-bind-address="127.0.0.1:$pkm_metrics" \
  --health-probe-bind-address="127.0.0.1:$pkm_health"
stack_set_ready provider-kilomesh "http://127.0.0.1:$pkm_health/readyz"
for name in function-kilomesh provider-kubernetes provider-kilomesh; do
  stack_wait_ready "$name" "$timeout"
done

# The runtime of each revision is the local process, now ready: say so, as
# the Deployment runtime would, so that the packages show HEALTHY True.
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
healthy="[{\"op\":\"add\",\"path\":\"/status/conditions/-\",\"value\":{\"type\":\"RuntimeHealthy\",\"status\":\"True\",\"reason\":\"HealthyPackageRevision\",\"lastTransitionTime\":\"$now\"}}]"
for rev in "functionrevisions.pkg.crossplane.io/$fn_rev" "providerrevisions.pkg.crossplane.io/$pk_rev" "providerrevisions.pkg.crossplane.io/$pkm_rev"; do
  if [ -z "$(kc get "$rev" -o 'jsonpath={.status.conditions[?(@.type=="RuntimeHealthy")].type}')" ]; then
    kc patch "$rev" --subresource=status --type=json -p "$healthy" >/dev/null
  fi
done
wait_for "the packages to become healthy" kc wait --for=condition=Healthy --timeout=1s \
  configurations.pkg.crossplane.io --all
wait_for "the packages to become healthy" kc wait --for=condition=Healthy --timeout=1s \
  "functions.pkg.crossplane.io/$fn_pkg" "providers.pkg.crossplane.io/$pk_pkg" "providers.pkg.crossplane.io/$pkm_pkg"

# The env file gets the addresses of what was started.
env_tmp=$STACK_DIR/env.tmp
{
  grep -v -E '^(REGISTRY|CROSSPLANE|FUNCTION|PROVIDER_KUBERNETES|PROVIDER_KILOMESH)_' "$STACK_DIR/env"
  printf "%s='%s'\n" \
    REGISTRY_ADDRESS "$registry" \
    CROSSPLANE_NAMESPACE "$ns" \
    CROSSPLANE_METRICS_PORT "$xp_metrics" \
    CROSSPLANE_HEALTH_PORT "$xp_health" \
    FUNCTION_KILOMESH_ADDRESS "127.0.0.1:$fn_port" \
    FUNCTION_KILOMESH_METRICS "127.0.0.1:$fn_metrics" \
    FUNCTION_KILOMESH_REVISION "$fn_rev" \
    PROVIDER_KUBERNETES_METRICS "127.0.0.1:$pk_metrics" \
    PROVIDER_KUBERNETES_REVISION "$pk_rev" \
    PROVIDER_KILOMESH_METRICS "127.0.0.1:$pkm_metrics" \
    PROVIDER_KILOMESH_REVISION "$pkm_rev"
} >"$env_tmp"
mv "$env_tmp" "$STACK_DIR/env"
stack_log "kilomesh installed in $((SECONDS - started))s"
