#!/usr/bin/env bash
# A dry run of one render scenario: the Peers every member cluster would
# receive, and the ClusterMesh status, in a readable form. It runs the
# command of the scenario's README.md, from its folder.
#
#   test/render/demo.sh <scenario>
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
s=${1:-three-clusters}
dir=examples/render/$s
. "$top/test/render/lib.sh"
if [ "${KILOMESH_RENDER_ISOLATED:-}" != 1 ]; then
  render_prepare
  render_isolated "$0" "$@"
  exit
fi
render_function
echo ">> (cd $dir && crossplane composition render ...), as its README.md says"
cmd=$(render_command "$dir")
(cd "$dir" && PATH=$BIN:$PATH bash -euo pipefail -c "$cmd") | "$work/rendertool" show
