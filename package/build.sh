#!/usr/bin/env bash
# Builds a package of kilomesh into _output/<package>/ without a container
# engine: the static binary, its runtime image as a tarball, and the xpkg.
#
#   package/build.sh provider|function|configuration|provider-kubernetes
#
# configuration has no binary and no image. provider-kubernetes is the
# package the end-to-end tests install as the Configuration's dependency: the
# package/ folder of the provider-kubernetes module that test/tools pins,
# with the binary test/tools builds as its runtime image, under its own
# version and xpkg.crossplane.io/crossplane-contrib.
#
# Environment:
#   VERSION   version of the package and tag of the image (default v0.0.0-dev)
#   GOARCH    architecture of the binary and image (default amd64)
#   REGISTRY  where the package is published (default xpkg.crossplane.io/kilomesh)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

known="provider, function, configuration, provider-kubernetes"
[ $# -eq 1 ] || { echo "usage: $0 <package> (one of: $known)" >&2; exit 2; }
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
  function)
    name=function-kilomesh
    main=./fn
    root=package/function
    examples=
    ports=(--port 9443/tcp --port 8080/tcp)
    ;;
  configuration)
    name=configuration-kilomesh
    main=
    root=package/configuration
    examples=
    ;;
  provider-kubernetes)
    name=provider-kubernetes
    main=
    mod=github.com/crossplane-contrib/provider-kubernetes
    version=$(cd test/tools/provider-kubernetes && go list -m -f '{{.Version}}' "$mod")
    root=$(cd test/tools/provider-kubernetes && go list -m -f '{{.Dir}}' "$mod")/package
    registry=xpkg.crossplane.io/crossplane-contrib
    examples=
    ports=(--port 8080/tcp --port 8081/tcp --port 9443/tcp)
    [ "$arch" = "$(go env GOARCH)" ] || { echo "build.sh: provider-kubernetes is built for $(go env GOARCH) only" >&2; exit 2; }
    ;;
  *) echo "build.sh: unknown package $what (known: $known)" >&2; exit 2 ;;
esac

out=$top/_output/$what
mkdir -p "$out"
# A package without examples points --examples-root at a folder that does not
# exist: the default, ./examples, is this repository's examples folder.
[ -n "$examples" ] || examples=$out/no-examples

test/tools/build.sh crossplane-cli
if [ "$what" = configuration ]; then
  echo ">> building the package" >&2
  "$top/.cache/bin/crossplane" xpkg build \
    --package-root "$root" \
    --examples-root "$examples" \
    --package-file "$out/$name-$version.xpkg"
  echo "$out/$name-$version.xpkg"
  exit 0
fi

if [ -n "$main" ]; then
  echo ">> building the $name binary (linux/$arch)" >&2
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w" -o "$out/$name" "$main"
else
  test/tools/build.sh "$name"
  cp "$top/.cache/bin/$name" "$out/$name"
fi

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
"$top/.cache/bin/crossplane" xpkg build \
  --package-root "$root" \
  --examples-root "$examples" \
  --embed-runtime-image-tarball "$out/image.tar" \
  --package-file "$out/$name-$version.xpkg"

echo "$out/$name-$version.xpkg"
