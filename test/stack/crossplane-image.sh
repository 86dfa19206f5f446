#!/usr/bin/env bash
# Builds Crossplane core from one of the Crossplane tools (test/tools/TOOL:
# crossplane, the version the stack runs; crossplane-oldest, the oldest
# version kilomesh supports), lays it out as Crossplane's release image is
# laid out (the core binary as entrypoint, the core CRDs in /crds, the
# webhook configurations in /webhookconfigurations, where `core init` looks
# by default), and imports it as stack.local/crossplane:<version> into the
# containerd of the management cluster's node:
#
#   test/stack/crossplane-image.sh [TOOL]
#
# Prints "<version> <chart>": the image tag, and the folder of that
# version's Helm chart in the Go module cache, for `helm install`.
#
# Environment (besides lib.sh's):
#   STACK_NO_BUILD=1  use the binary in $STACK_BIN as it is
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

stack_env_load
tool=${1:-crossplane}
dir=$STACK_TOP/test/tools/$tool
[ -f "$dir/BUILD" ] || stack_die "no Crossplane tool $tool in test/tools"
read -r bin _ <"$dir/BUILD"
[ "${STACK_NO_BUILD:-}" = 1 ] || "$STACK_TOP/test/tools/build.sh" "$tool"
[ -x "$STACK_BIN/$bin" ] || stack_die "missing $STACK_BIN/$bin"
# The module holds the chart and CRDs; a cached binary may outlive it.
mod=$(cd "$dir" && go mod download github.com/crossplane/crossplane/v2 &&
  go list -m -f '{{.Dir}} {{.Version}}' github.com/crossplane/crossplane/v2)
read -r module version <<<"$mod"
cluster=$module/cluster
if [ ! -d "$cluster/crds" ] || [ ! -d "$cluster/charts/crossplane" ]; then
  stack_die "cannot find Crossplane's CRDs and chart in $cluster"
fi

out=$STACK_DIR/images/crossplane-$version.tar
"$STACK_DIR/images/bin/podimage" --tag "stack.local/crossplane:$version" --out "$out" \
  --uid 65532 --entrypoint /usr/local/bin/crossplane --file "$STACK_BIN/$bin:/usr/local/bin/crossplane" \
  --file "$cluster/crds:/crds" --file "$cluster/webhookconfigurations/usage.yaml:/webhookconfigurations/usage.yaml"
"$STACK_TOP/test/stack/node.sh" import "$STACK_MANAGEMENT" "$out"
echo "$version $cluster/charts/crossplane"
