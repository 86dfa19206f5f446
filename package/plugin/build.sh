#!/usr/bin/env bash
# Builds the release archives of kubectl-kilomesh, the kubectl plugin, and
# its krew manifest, into _output/plugin/<version>/:
#
#   kubectl-kilomesh_<version>_<os>_<arch>.tar.gz         the binary and LICENSE
#   kubectl-kilomesh_<version>_<os>_<arch>.tar.gz.sha256  its sha256
#   kilomesh.yaml                                         package/plugin/kilomesh.yaml with
#                                                         the version and a platform per archive
#
# The archives are reproducible: the same commit and Go give the same sha256.
# It prints the files it wrote, one per line.
#
# Environment:
#   VERSION      version of the release (default v0.0.0-dev); a semantic
#                version with a leading v, as krew requires
#   PLATFORMS    platforms to build (default "linux/amd64 linux/arm64
#                darwin/amd64 darwin/arm64 windows/amd64")
#   RELEASE_URL  where the archives are downloaded from (default
#                https://github.com/kilomesh/kilomesh/releases/download/<version>)
#   OUTPUT       folder to write into (default _output/plugin/<version>)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"

version=${VERSION:-v0.0.0-dev}
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "build.sh: VERSION $version is not a semantic version with a leading v" >&2; exit 2; }
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}
url=${RELEASE_URL:-https://github.com/kilomesh/kilomesh/releases/download/$version}
out=${OUTPUT:-$top/_output/plugin/$version}

rm -rf "$out"
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

manifest=$out/kilomesh.yaml
sed "s|^  version: VERSION$|  version: $version|" package/plugin/kilomesh.yaml > "$manifest"
grep -q "^  version: $version$" "$manifest" || { echo "build.sh: package/plugin/kilomesh.yaml has no 'version: VERSION' line" >&2; exit 1; }
echo "  platforms:" >> "$manifest"

for platform in $platforms; do
  os=${platform%/*}
  arch=${platform#*/}
  bin=kubectl-kilomesh
  [ "$os" != windows ] || bin=kubectl-kilomesh.exe
  echo ">> building $bin for $os/$arch" >&2
  rm -rf "${stage:?}"/*
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$stage/$bin" ./cmd/kubectl-kilomesh
  cp LICENSE "$stage/LICENSE"
  chmod 0755 "$stage/$bin"
  chmod 0644 "$stage/LICENSE"
  archive=kubectl-kilomesh_${version}_${os}_${arch}.tar.gz
  # A fixed order, owner and time, and gzip without a name or time: the
  # sha256 depends on the content only.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=gnu \
    -C "$stage" -cf - LICENSE "$bin" | gzip -n -9 > "$out/$archive"
  sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
  echo "$sum  $archive" > "$out/$archive.sha256"
  cat >> "$manifest" <<ENTRY
  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url/$archive
    sha256: $sum
    files:
    - from: $bin
      to: .
    - from: LICENSE
      to: .
    bin: $bin
ENTRY
  echo "$out/$archive"
  echo "$out/$archive.sha256"
done
echo "$manifest"
