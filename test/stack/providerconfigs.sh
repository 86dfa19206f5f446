#!/usr/bin/env bash
# Gives a namespace of the management cluster one provider-kubernetes
# ProviderConfig per member cluster, named after the cluster, each backed by
# a Secret <cluster>-kubeconfig with a least-privilege kubeconfig: what a
# ClusterMesh in that namespace names in spec.clusters[].providerConfigRef.
# It runs the block of docs/install.md that users run for each member, as it
# is, with member, ctx and ns set.
#
#   test/stack/providerconfigs.sh NAMESPACE [CLUSTER...]   (default: every cluster)
#
# With STACK_CLUSTER_CONFIGS=1 it also makes, as docs/install.md shows for
# delivery: Objects, a ClusterProviderConfig <NAMESPACE>-<cluster> per member
# for the same Secret.
#
# On a stack with real nodes (STACK_REAL_NODES=1) the server address is
# where the management node's pods reach the member (<CLUSTER>_POD_SERVER).
# A copy of each member's kubeconfig is kept in
# $STACK_DIR/members/<cluster>.kubeconfig (the tests look for its token).
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

mkdir -p "$STACK_DIR/members"
for c in "${clusters[@]}"; do
  override=()
  if [ "${STACK_REAL_NODES:-}" = 1 ]; then
    # The providers run in pods of the management node: the member's
    # apiserver is at the forwarder there, not at the host's loopback.
    v=$(stack_var "$c" POD_SERVER)
    override=(server="${!v}")
  fi
  stack_doc_run docs/install.md member member="$c" ctx="$c" ns="$ns" "${override[@]}" >/dev/null
  if [ "${STACK_CLUSTER_CONFIGS:-}" = 1 ]; then
    # delivery: Objects names ClusterProviderConfigs only: <ns>-<cluster>.
    stack_doc_run docs/install.md member-cluster-config member="$c" ns="$ns" >/dev/null
  fi
  kcfg=$STACK_DIR/members/$c.kubeconfig
  if [ ! -s "$kcfg" ]; then
    (umask 077; stack_kubectl "$mgmt" -n "$ns" get secret "$c-kubeconfig" -o 'go-template={{index .data "kubeconfig" | base64decode}}' >"$kcfg")
  fi
  stack_log "ProviderConfig $ns/$c reaches $c as kube-system/kilomesh"
done
