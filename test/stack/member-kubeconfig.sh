#!/usr/bin/env bash
# Creates kilomesh's least-privilege identity in one cluster of the stack
# (examples/member-rbac.yaml, applied unchanged) and writes a kubeconfig that
# uses its ServiceAccount token and the cluster's CA.
#
#   test/stack/member-kubeconfig.sh CLUSTER OUT
#
# The token Secret is filled in by the serviceaccount-token controller, so the
# cluster needs a kube-controller-manager (STACK_KCM, see up.sh). OUT is
# written with mode 600.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -eq 2 ] || stack_die "usage: $0 CLUSTER OUT"
c=$1 out=$2
stack_env_load
server_var=$(stack_var "$c" SERVER)
ca_var=$(stack_var "$c" CA)
kcm_var=$(stack_var "$c" KCM)
[ -n "${!server_var:-}" ] || stack_die "no cluster $c in $STACK_DIR/env (clusters: $STACK_CLUSTERS)"
server=${!server_var}
ca=${!ca_var}

stack_kubectl "$c" apply -f "$STACK_TOP/examples/member-rbac.yaml" >/dev/null

timeout=${STACK_TIMEOUT:-30}
deadline=$((SECONDS + timeout))
token=
until token=$(stack_kubectl "$c" -n kube-system get secret kilomesh-token -o 'jsonpath={.data.token}') && [ -n "$token" ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    hint=
    [ "${!kcm_var:-}" = true ] || hint=" ($c runs no kube-controller-manager: start the stack with STACK_KCM=all)"
    stack_die "the token of kube-system/kilomesh-token in $c was not filled in after ${timeout}s$hint"
  fi
  sleep 0.2
done
token=$(printf '%s' "$token" | base64 -d)

stack_write_kubeconfig "$out" "kilomesh@$c" "$c" "$server" "$ca" kilomesh "$token"
stack_log "wrote $out (ServiceAccount kube-system/kilomesh of $c)"
