#!/usr/bin/env bash
# Builds a package of kilomesh into _output/<package>/ without a container
# engine: the static binary, its runtime image as a tarball, and the xpkg.
#
#   package/build.sh provider
#
# Environment:
#   VERSION   version of the package and tag of the image (default v0.0.0-dev)
#   GOARCH    architecture of the binary and image (default amd64)
#   REGISTRY  where the package is published (default xpkg.crossplane.io/kilomesh)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

[ $# -eq 1 ] || { echo "usage: $0 provider" >&2; exit 2; }
what=$1
version=${VERSION:-v0.0.0-dev}
arch=${GOARCH:-amd64}
registry=${REGISTRY:-xpkg.crossplane.io/kilomesh}

case "$what" in
  provider)
    name=provider-kilomesh
    main=./provider/cmd/provider
    root=package/provider
    examples=examples/provider
    ports=(--port 8080/tcp --port 8081/tcp)
    ;;
  *) echo "build.sh: unknown package $what (known: provider)" >&2; exit 2 ;;
esac

out=$top/_output/$what
mkdir -p "$out"

echo ">> building the $name binary (linux/$arch)" >&2
CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$out/$name" "$main"

echo ">> writing the runtime image tarball" >&2
go run ./package/internal/imagebuild \
  --binary "$out/$name" \
  --entrypoint "/usr/local/bin/$name" \
  --uid 65532 \
  --platform "linux/$arch" \
  --tag "$registry/$name:$version" \
  "${ports[@]}" \
  --out "$out/image.tar"

echo ">> building the package" >&2
test/tools/build.sh crossplane-cli
"$top/.cache/bin/crossplane" xpkg build \
  --package-root "$root" \
  --examples-root "$examples" \
  --embed-runtime-image-tarball "$out/image.tar" \
  --package-file "$out/$name-$version.xpkg"

echo "$out/$name-$version.xpkg"
