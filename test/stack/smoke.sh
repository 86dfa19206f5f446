#!/usr/bin/env bash
# Checks a running stack: every apiserver answers, clusters are isolated, the
# least-privilege kubeconfig of member-kubeconfig.sh can do exactly its job,
# and namespace deletion and ownerRef garbage collection complete in the
# management cluster. Its probe objects are removed again; the kilomesh
# identity of member-rbac.yaml stays in every cluster that has a
# kube-controller-manager (applying it again is harmless).
#
#   test/stack/up.sh && test/stack/smoke.sh; test/stack/down.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
stack_env_load
read -r -a clusters <<<"$STACK_CLUSTERS"
mgmt=$STACK_MANAGEMENT
fails=0
ok() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; fails=$((fails + 1)); }
k() { stack_kubectl "$@"; }
# check DESCRIPTION CMD...: ok if CMD succeeds, else FAIL.
check() {
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then ok "$what"; else fail "$what"; fi
}

for c in "${clusters[@]}"; do
  if v=$(k "$c" version -o json 2>/dev/null | grep -o '"gitVersion": *"[^"]*"' | tail -1); then
    ok "$c answers ($v)"
  else
    fail "$c does not answer"
  fi
done

probe=smoke-$RANDOM
if [ ${#clusters[@]} -ge 2 ]; then
  a=${clusters[1]}
  k "$a" create namespace "$probe" >/dev/null
  for c in "${clusters[@]}"; do
    [ "$c" = "$a" ] && continue
    if k "$c" get namespace "$probe" >/dev/null 2>&1; then
      fail "namespace $probe created in $a is visible in $c"
    else
      ok "namespace $probe created in $a is not visible in $c"
    fi
  done
  k "$a" delete namespace "$probe" --wait=false >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in "${clusters[@]}"; do
  kcm=$(stack_var "$c" KCM) crd=$(stack_var "$c" PEER_CRD)
  if [ "${!kcm}" != true ]; then
    ok "$c: no kube-controller-manager, least-privilege kubeconfig not checked"
    continue
  fi
  kc=$tmp/$c.kubeconfig
  "$STACK_TOP/test/stack/member-kubeconfig.sh" "$c" "$kc" 2>/dev/null
  check "$c: member kubeconfig has mode 600" test "$(stat -c %a "$kc")" = 600
  m() { "$STACK_BIN/kubectl" --kubeconfig "$kc" "$@"; }
  check "$c: member lists nodes" m get nodes
  if [ "${!crd}" = true ]; then
    cat >"$tmp/peer.yaml" <<YAML
apiVersion: kilo.squat.ai/v1alpha1
kind: Peer
metadata:
  name: $probe
spec:
  allowedIPs: ["10.5.0.1/32"]
  publicKey: GY5aT1N9dTR/nJnT1N2f4ClZWVj0jOAld0r8ysWLyjg=
  persistentKeepalive: 10
YAML
    check "$c: member lists peers" m get peers.kilo.squat.ai
    check "$c: member creates a peer" m apply -f "$tmp/peer.yaml"
    check "$c: member deletes a peer" m delete peer.kilo.squat.ai "$probe"
  fi
  for forbidden in "get secrets -A" "get configmaps -n default" "get pods -A" "create namespace $probe-x"; do
    # shellcheck disable=SC2086 # the words are arguments
    if out=$(m $forbidden 2>&1); then
      fail "$c: member may run 'kubectl $forbidden'"
    elif grep -q Forbidden <<<"$out"; then
      ok "$c: member is forbidden to run 'kubectl $forbidden'"
    else
      fail "$c: 'kubectl $forbidden' failed, but not as Forbidden: $out"
    fi
  done
done

kcm=$(stack_var "$mgmt" KCM)
if [ "${!kcm}" = true ]; then
  k "$mgmt" create namespace "$probe" >/dev/null
  k "$mgmt" -n "$probe" create configmap owner >/dev/null
  uid=$(k "$mgmt" -n "$probe" get configmap owner -o 'jsonpath={.metadata.uid}')
  k "$mgmt" -n "$probe" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: child
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: owner
    uid: $uid
YAML
  k "$mgmt" -n "$probe" delete configmap owner >/dev/null
  s=$SECONDS
  if k "$mgmt" -n "$probe" wait --for=delete configmap/child --timeout=60s >/dev/null 2>&1; then
    ok "$mgmt: owned object garbage-collected in $((SECONDS - s))s"
  else
    fail "$mgmt: owned object not garbage-collected within 60s"
  fi
  s=$SECONDS
  if k "$mgmt" delete namespace "$probe" --timeout=60s >/dev/null 2>&1; then
    ok "$mgmt: namespace deletion completed in $((SECONDS - s))s"
  else
    fail "$mgmt: namespace deletion did not complete within 60s"
  fi
fi

if [ "$fails" -gt 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
