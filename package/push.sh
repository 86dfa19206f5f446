#!/usr/bin/env bash
# Publishes packages that package/build.sh built, each under
# HOST/<organisation>/<name>:<version>: the packages of several platforms as
# one multi-platform index.
#
#   package/push.sh HOST [package...]   (default: function provider configuration)
#
# HOST is a registry, e.g. 127.0.0.1:5000 or xpkg.crossplane.io; VERSION
# says which build to publish (default v0.0.0-dev). The organisation is
# kilomesh, crossplane-contrib for provider-kubernetes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$top/package/lib.sh"

[ $# -ge 1 ] || { echo "usage: $0 HOST [package...]" >&2; exit 2; }
host=$1
shift
[ $# -gt 0 ] || set -- function provider configuration
for what in "$@"; do
  pkg_info "$what"
  files=("$top/_output/$what/$version/$name-$version"*.xpkg)
  [ -f "${files[0]}" ] || { echo "push.sh: no package of $what $version in _output/$what/$version (run package/build.sh $what)" >&2; exit 1; }
  ref=$host/${registry#*/}/$name:$version
  list=$(IFS=,; echo "${files[*]}")
  "$top/.cache/bin/crossplane" xpkg push -f "$list" "$ref"
  echo "$ref"
done
