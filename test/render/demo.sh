#!/usr/bin/env bash
# A dry run of one render scenario: the Peers every member cluster would
# receive, and the ClusterMesh status, in a readable form.
#
#   test/render/demo.sh <scenario>
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
s=${1:-three-clusters}
dir=examples/render/$s
. "$top/test/render/lib.sh"
echo ">> crossplane composition render $dir/xr.yaml (function-kilomesh on 127.0.0.1:$port)"
args=(--observed-resources="$dir/observed.yaml" --xrd=package/configuration/xrd.yaml
      --crossplane-binary="$BIN/crossplane-core" --include-full-xr)
[ -f "$dir/required.yaml" ] && args+=(--required-resources="$dir/required.yaml")
"$BIN/crossplane" composition render "$dir/xr.yaml" package/configuration/composition.yaml "$work/functions.yaml" "${args[@]}" \
  | "$work/rendertool" show
