#!/usr/bin/env bash
# Renders every examples/render/<scenario>/ with the real Crossplane CLI by
# running, from the scenario's folder, exactly the command its README.md
# prints, against function-kilomesh running as a local process; compares the
# output with the scenario's expected.yaml, and validates it with
# `crossplane resource validate` against the XRD, provider-kilomesh's CRDs,
# provider-kubernetes' CRDs and Kilo's Peer CRD -- including every Peer the
# output delivers, extracted from its Objects and PeerSets.
#
#   test/render/check.sh [scenario...]     check (default: every scenario)
#   UPDATE=1 test/render/check.sh ...      rewrite expected.yaml (and the XR
#                                          fixtures of test/argocd) instead
#
# The function listens on 127.0.0.1:9443, the address the scenarios'
# functions.yaml name, in a network namespace of its own (unshare).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
. "$top/test/render/lib.sh"

if [ "${KILOMESH_RENDER_ISOLATED:-}" != 1 ]; then
  render_prepare
  # provider-kubernetes' CRDs, from its module.
  pk=$(cd "$work" && GOFLAGS=-mod=mod GONOSUMDB=github.com/nebius/gosdk go mod download -json github.com/crossplane-contrib/provider-kubernetes@v1.3.1 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$pk/package/crds" ] || { echo "render-check: cannot find provider-kubernetes' CRDs" >&2; exit 1; }
  mkdir -p "$work/schemas"
  cp package/configuration/xrd.yaml package/provider/crds/*.yaml test/crds/*.yaml "$work/schemas/"
  cp "$pk"/package/crds/kubernetes.m.crossplane.io_*.yaml "$work/schemas/"
  render_isolated "$0" "$@"
  exit
fi

render_function
all=
if [ $# -eq 0 ]; then
  all=1
  set -- $(cd examples/render && ls -d -- */ | tr -d /)
fi
export PATH=$BIN:$PATH
failed=0
for s in "$@"; do
  dir=examples/render/$s
  out=$work/$s.yaml
  cmd=$(render_command "$dir")
  if [ -z "$cmd" ]; then
    echo "FAIL $s: $dir/README.md has no command marked <!-- render -->"; failed=1; continue
  fi
  if ! (cd "$dir" && bash -euo pipefail -c "$cmd") 2>"$work/$s.err" | "$work/rendertool" normalize >"$out"; then
    echo "FAIL $s: render failed:"; cat "$work/$s.err"; failed=1; continue
  fi
  if [ "${UPDATE:-}" = 1 ]; then
    cp "$out" "$dir/expected.yaml"
    # The Argo CD health check is tested against every rendered XR.
    awk 'NR == 1 && $0 == "---" { next } /^---$/ { exit } { print }' "$out" >"test/argocd/testdata/render-$s.yaml"
  elif ! diff -u "$dir/expected.yaml" "$out" >"$work/$s.diff"; then
    echo "FAIL $s: output differs from $dir/expected.yaml:"; cat "$work/$s.diff"; failed=1; continue
  fi
  # Results are not resources; every other document must match its schema.
  "$work/rendertool" peers <"$out" >"$work/$s.peers.yaml"
  if ! crossplane resource validate "$work/schemas" "$out" --crossplane-image="" --skip-success-results >"$work/$s.validate" 2>&1 \
    || ! crossplane resource validate "$work/schemas" "$work/$s.peers.yaml" --crossplane-image="" --skip-success-results >>"$work/$s.validate" 2>&1; then
    echo "FAIL $s: invalid output:"; cat "$work/$s.validate"; failed=1; continue
  fi
  if grep 'could not find CRD/XRD' "$work/$s.validate" | grep -v 'Kind=Result$' >&2; then
    echo "FAIL $s: output has resources of unknown kinds"; failed=1; continue
  fi
  echo "ok   $s"
done
# Every ClusterMesh of examples/invalid must be rejected by the XRD's schema,
# for the reason its "# expect:" line gives.
for f in ${all:+examples/invalid/*.yaml}; do
  expect=$(sed -n 's/^# expect: //p' "$f")
  if crossplane resource validate package/configuration/xrd.yaml "$f" --crossplane-image="" >"$work/invalid.out" 2>&1; then
    echo "FAIL $f: the XRD accepts it"; failed=1
  elif ! grep -qF -- "$expect" "$work/invalid.out"; then
    echo "FAIL $f: rejected, but not with \"$expect\":"; cat "$work/invalid.out"; failed=1
  else
    echo "ok   $f"
  fi
done

if [ "$failed" != 0 ]; then
  echo "function log:"; cat "$work/function.log"
  exit 1
fi
