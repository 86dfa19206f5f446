#!/usr/bin/env bash
# Gives a namespace of the management cluster one provider-kubernetes
# ProviderConfig per member cluster, named after the cluster, each backed by
# a Secret with a least-privilege kubeconfig (member-kubeconfig.sh): what a
# ClusterMesh in that namespace names in spec.clusters[].providerConfigRef.
#
#   test/stack/providerconfigs.sh NAMESPACE [CLUSTER...]   (default: every cluster)
#
# The Secret of cluster C is <C>-kubeconfig, key kubeconfig. The kubeconfigs
# are kept in $STACK_DIR/members/<C>.kubeconfig; they are built once per
# cluster and reused for every namespace.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || stack_die "usage: $0 NAMESPACE [CLUSTER...]"
ns=$1
shift
stack_env_load
clusters=("$@")
[ ${#clusters[@]} -gt 0 ] || read -r -a clusters <<<"$STACK_CLUSTERS"
mgmt=$STACK_MANAGEMENT

stack_kubectl "$mgmt" create namespace "$ns" --dry-run=client -o yaml | stack_kubectl "$mgmt" apply -f - >/dev/null
mkdir -p "$STACK_DIR/members"
for c in "${clusters[@]}"; do
  kcfg=$STACK_DIR/members/$c.kubeconfig
  [ -s "$kcfg" ] || "$(dirname "$0")/member-kubeconfig.sh" "$c" "$kcfg"
  stack_kubectl "$mgmt" -n "$ns" create secret generic "$c-kubeconfig" --from-file=kubeconfig="$kcfg" \
    --dry-run=client -o yaml | stack_kubectl "$mgmt" apply -f - >/dev/null
  stack_kubectl "$mgmt" apply -f - >/dev/null <<YAML
apiVersion: kubernetes.m.crossplane.io/v1alpha1
kind: ProviderConfig
metadata:
  name: $c
  namespace: $ns
spec:
  credentials:
    source: Secret
    secretRef:
      namespace: $ns
      name: $c-kubeconfig
      key: kubeconfig
YAML
  stack_log "ProviderConfig $ns/$c reaches $c as kube-system/kilomesh"
done
