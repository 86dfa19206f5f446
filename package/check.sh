#!/usr/bin/env bash
# Validates the packages package/build.sh built: every document each .xpkg
# holds (its crossplane.yaml, CRDs, XRD, Composition, activation policy)
# and every example it embeds must pass `crossplane resource validate`
# against Crossplane's own schemas -- including those of the package
# metadata, meta.pkg.crossplane.io -- the provider's CRDs,
# provider-kubernetes' CRDs and Kilo's Peer CRD. A document of a kind that
# has no schema fails the check, except Kubernetes' own kinds.
#
#   package/check.sh [package...]   (default: function provider configuration)
#
# VERSION says which build to check (default v0.0.0-dev).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$top/package/lib.sh"
[ $# -gt 0 ] || set -- function provider configuration
cli=$top/.cache/bin/crossplane
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The schemas, at the versions test/tools pins.
moddir() { (cd "$top/test/tools/$1" && go list -m -f '{{.Dir}}' "$2"); }
xp=$(moddir crossplane github.com/crossplane/crossplane/v2)
pk=$(moddir provider-kubernetes github.com/crossplane-contrib/provider-kubernetes)
mkdir -p "$work/schemas"
cp "$xp"/cluster/meta/*.yaml "$xp"/cluster/crds/*.yaml "$pk"/package/crds/*.yaml \
  package/provider/crds/*.yaml package/configuration/xrd.yaml test/crds/*.yaml "$work/schemas/"

failed=0
# validate NAME FILE: every document of FILE against the schemas.
validate() {
  if ! "$cli" resource validate "$work/schemas" "$2" --crossplane-image="" --skip-success-results >"$work/out" 2>&1; then
    echo "FAIL $1:"; cat "$work/out"; failed=1; return
  fi
  # Kubernetes' own kinds (apiextensions.k8s.io, rbac.authorization.k8s.io)
  # are validated by the API server when Crossplane applies them.
  if grep 'could not find CRD/XRD' "$work/out" | grep -v -E 'k8s\.io/v1, Kind=|: /v1, Kind=' >&2; then
    echo "FAIL $1: documents of kinds without a schema"; failed=1; return
  fi
  echo "ok   $1"
}

for what in "$@"; do
  pkg_info "$what"
  files=("$top/_output/$what/$version/$name-$version"*.xpkg)
  [ -f "${files[0]}" ] || { echo "check.sh: no package of $what $version (run package/build.sh $what)" >&2; exit 1; }
  for f in "${files[@]}"; do
    base=$(basename "$f" .xpkg)
    "$cli" xpkg extract --from-xpkg "$f" -o "$work/$base.gz" >/dev/null
    gzip -dc "$work/$base.gz" >"$work/$base.yaml"
    validate "$base" "$work/$base.yaml"
  done
  if [ -n "$examples" ]; then
    for e in "$examples"/*.yaml; do
      validate "$name example $(basename "$e")" "$e"
    done
  fi
done
exit "$failed"
