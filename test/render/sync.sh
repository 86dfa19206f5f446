#!/usr/bin/env bash
# Writes into every examples/render/<scenario>/ the files each scenario
# shares with the others, so that `crossplane composition render` runs from
# the folder as its README says: the Composition and the XRD of the
# Configuration package (package/configuration/composition.yaml and
# xrd.yaml), and functions.yaml (test/render/functions.yaml). make generate
# runs it; make check-generate fails when a copy is out of date.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
for dir in examples/render/*/; do
  cp package/configuration/composition.yaml package/configuration/xrd.yaml "$dir"
  cp test/render/functions.yaml "$dir/functions.yaml"
done
