#!/usr/bin/env bash
# Builds a released version of kilomesh's packages as it was released, from
# its own sources and with its own package/build.sh, and pushes them to the
# stack's registry under their production paths:
#
#   test/stack/release.sh v0.1.0
#
# The sources are those of the release's tag (git tag v0.1.0). A clone
# without tags (CI may clone a branch alone) builds the commit that
# package/releases records for the version instead, and says so; the tag,
# when there is one, must name that same commit. The sources are exported
# with git archive into <run>/releases/<version>/src, outside the checkout.
# A release whose tree has package/push.sh publishes with it (several
# platforms as one index); an older one is pushed package by package with
# crossplane xpkg push, as it was. Prints the commit built and where it
# came from (tag or record) on stdout.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -eq 1 ] || stack_die "usage: $0 VERSION (one of package/releases)"
version=$1
stack_env_load
[ -n "${REGISTRY_ADDRESS:-}" ] || stack_die "no registry in $STACK_DIR/env: run crossplane-up.sh first"

recorded=$(awk -v v="$version" '$1 == v { print $2 }' "$STACK_TOP/package/releases")
[ -n "$recorded" ] || stack_die "package/releases records no commit for $version"
git=(git -C "$STACK_TOP")
if tagged=$("${git[@]}" rev-parse -q --verify "refs/tags/$version^{commit}"); then
  [ "$tagged" = "$recorded" ] ||
    stack_die "tag $version names $tagged, package/releases records $recorded: one of them is wrong"
  from="tag $version"
else
  stack_log "no tag $version in this clone: building the commit package/releases records for it"
  from="commit recorded in package/releases (no tag $version in this clone)"
fi
"${git[@]}" cat-file -e "$recorded^{commit}" 2>/dev/null ||
  stack_die "commit $recorded of $version is not in this clone (a shallow clone? git fetch --unshallow)"

out=$STACK_DIR/releases/$version
rm -rf "$out"
mkdir -p "$out/src"
"${git[@]}" archive "$recorded" | tar -x -C "$out/src"
stack_log "building kilomesh $version ($recorded, $from) with its own package/build.sh"
(
  cd "$out/src"
  for p in function provider configuration; do
    VERSION=$version package/build.sh "$p" >>"$out/build.log" 2>&1 ||
      { tail -n 20 "$out/build.log" >&2; exit 1; }
  done
  if [ -x package/push.sh ]; then
    VERSION=$version package/push.sh "$REGISTRY_ADDRESS" function provider configuration >>"$out/build.log" 2>&1
  else
    for p in function provider configuration; do
      name=$p-kilomesh
      [ "$p" != configuration ] || name=configuration-kilomesh
      "$STACK_BIN/crossplane" xpkg push -f "_output/$p/$name-$version.xpkg" \
        "$REGISTRY_ADDRESS/kilomesh/$name:$version" >>"$out/build.log" 2>&1
    done
  fi
) || stack_die "building or pushing kilomesh $version failed (log: $out/build.log)"
stack_log "pushed kilomesh $version to $REGISTRY_ADDRESS"
printf '%s %s\n' "$recorded" "$from"
