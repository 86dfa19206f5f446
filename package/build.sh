#!/usr/bin/env bash
# Builds a package of kilomesh into _output/<package>/<version>/ without a
# container engine: for the function and the provider, one static binary, one
# runtime image tarball and one .xpkg per platform; for the Configuration,
# one .xpkg. It prints the .xpkg files it wrote, one per line;
# package/push.sh publishes them (several platforms as one index).
#
#   package/build.sh provider|function|configuration|provider-kubernetes
#
# configuration has no binary and no image. Its dependencies on
# function-kilomesh and provider-kilomesh are written as exactly VERSION:
# the Configuration needs its own release of both. provider-kubernetes is
# the package the end-to-end tests install as the Configuration's
# dependency: the package/ folder of the provider-kubernetes module that
# test/tools pins, with the binary test/tools builds as its runtime image,
# under its own version and xpkg.crossplane.io/crossplane-contrib, for the
# build machine's platform only.
#
# Every binary must carry Go's fallback CA roots (the images hold no CA
# bundle): the build fails otherwise.
#
# Environment:
#   VERSION    version of the packages and tag of the images (default
#              v0.0.0-dev); a semantic version with a leading v
#   PLATFORMS  platforms of the function and the provider (default
#              "linux/amd64 linux/arm64")
#   REGISTRY   registry and organisation the packages are published under
#              (default xpkg.crossplane.io/kilomesh); Crossplane names an
#              installed package after its organisation and name, and the
#              Composition calls the function kilomesh-function-kilomesh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

[ $# -eq 1 ] || { echo "usage: $0 <package> (one of: provider, function, configuration, provider-kubernetes)" >&2; exit 2; }
what=$1
platforms=${PLATFORMS:-linux/amd64 linux/arm64}

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$top/package/lib.sh"
pkg_info "$what"
[ "$what" != provider-kubernetes ] || platforms=linux/$(go env GOARCH)

out=$top/_output/$what/$version
rm -rf "$out"
mkdir -p "$out"
# A package without examples points --examples-root at a folder that does not
# exist: the default, ./examples, is this repository's examples folder.
[ -n "$examples" ] || examples=$out/no-examples

test/tools/build.sh crossplane-cli
if [ "$what" = configuration ]; then
  # The dependencies on the function and the provider are this very release.
  staged=$out/root
  cp -r "$root" "$staged"
  sed -i -e "s|\"=v0.0.0-dev\"|\"=$version\"|" -e "s|xpkg.crossplane.io/kilomesh/|$registry/|" "$staged/crossplane.yaml"
  pinned=$(grep -c "version: \"=$version\"" "$staged/crossplane.yaml" || true)
  [ "$pinned" = 2 ] || { echo "build.sh: expected two dependencies pinned to $version in $staged/crossplane.yaml, found $pinned" >&2; exit 1; }
  echo ">> building the package" >&2
  "$top/.cache/bin/crossplane" xpkg build \
    --package-root "$staged" \
    --examples-root "$examples" \
    --package-file "$out/$name-$version.xpkg"
  echo "$out/$name-$version.xpkg"
  exit 0
fi

[ -n "$main" ] || test/tools/build.sh "$name"
for platform in $platforms; do
  os=${platform%/*} arch=${platform#*/}
  dir=$out/${os}_$arch
  mkdir -p "$dir"
  if [ -n "$main" ]; then
    echo ">> building the $name binary ($platform)" >&2
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$dir/$name" "$main"
    go version -m "$dir/$name" | grep -q 'golang.org/x/crypto/x509roots/fallback' ||
      { echo "build.sh: $dir/$name carries no CA roots (golang.org/x/crypto/x509roots/fallback)" >&2; exit 1; }
  else
    cp "$top/.cache/bin/$name" "$dir/$name"
  fi

  echo ">> writing the runtime image tarball ($platform)" >&2
  go run ./package/internal/imagebuild \
    --binary "$dir/$name" \
    --entrypoint "/usr/local/bin/$name" \
    --uid 65532 \
    --platform "$platform" \
    --tag "$registry/$name:$version" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.title=$name" \
    "${ports[@]}" \
    --out "$dir/image.tar"

  echo ">> building the package ($platform)" >&2
  "$top/.cache/bin/crossplane" xpkg build \
    --package-root "$root" \
    --examples-root "$examples" \
    --embed-runtime-image-tarball "$dir/image.tar" \
    --package-file "$out/$name-$version-${os}_$arch.xpkg"
  echo "$out/$name-$version-${os}_$arch.xpkg"
done
