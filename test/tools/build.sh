#!/usr/bin/env bash
# Builds the named tools (folders of this directory) and puts their binaries in
# $BIN (default .cache/bin at the top of the repository). Each tool is a small
# Go module with a BUILD file of lines "<binary> <package> [go build flags...]";
# the package may be a path inside the tool's own module (e.g. ./kube-apiserver),
# and a flag holding spaces is quoted ('-ldflags=-X a=1 -X b=2'). A tool
# that builds the project's own packages lists their folders in SOURCES.
#
# Built binaries are kept outside the checkout, in $TOOL_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/kilomesh/tools), one folder per tool and content
# hash of its folder and the Go version, so every clone on the machine reuses
# them: a fresh clone links them into $BIN in seconds instead of rebuilding
# for a quarter of an hour.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BIN=${BIN:-$top/.cache/bin}
TOOL_CACHE=${TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kilomesh/tools}
mkdir -p "$BIN" "$TOOL_CACHE"
if [ $# -eq 0 ]; then
  for d in "$here"/*/; do
    d=${d%/}
    set -- "$@" "${d##*/}"
  done
fi

# binaries prints the binary names a tool's BUILD file declares.
binaries() {
  local bin _
  while read -r bin _; do
    case "$bin" in ''|'#'*) continue ;; esac
    echo "$bin"
  done < "$1/BUILD"
}

for tool in "$@"; do
  dir=$here/$tool
  [ -f "$dir/BUILD" ] || { echo "build.sh: no tool $tool" >&2; exit 2; }
  sum=$( (go version; cd "$dir" && find . -type f ! -name '*.test' | LC_ALL=C sort | xargs sha256sum
    # A tool built from the project's own packages names them in SOURCES.
    if [ -f SOURCES ]; then
      grep -v '^#' SOURCES | (cd "$top" && xargs -I{} find {} -type f ! -name '*_test.go' | LC_ALL=C sort | xargs sha256sum)
    fi) | sha256sum | cut -c1-16)
  cached=$TOOL_CACHE/$tool-$sum
  if [ ! -f "$cached/.complete" ]; then
    start=$(date +%s)
    echo ">> building $tool (cached in $TOOL_CACHE; first build takes minutes)" >&2
    # Build into a private folder and rename it into place, so two clones
    # building the same tool at once never see a half-written binary.
    tmp=$(mktemp -d "$TOOL_CACHE/.$tool-$sum.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    while read -r bin pkg flags; do
      case "$bin" in ''|'#'*) continue ;; esac
      args=()
      if [ -n "${flags:-}" ]; then
        # xargs splits the flags like a shell would, honouring quotes.
        mapfile -t args < <(printf '%s\n' "$flags" | xargs -n1 printf '%s\n')
      fi
      (cd "$dir" && CGO_ENABLED=0 go build -trimpath "${args[@]}" -o "$tmp/$bin" "$pkg")
    done < "$dir/BUILD"
    touch "$tmp/.complete"
    if ! mv -T "$tmp" "$cached" 2>/dev/null; then
      rm -rf "$tmp" # another clone finished the same build first
    fi
    trap - EXIT
    echo ">> built $tool in $(( $(date +%s) - start ))s" >&2
  fi
  for bin in $(binaries "$dir"); do
    # A hard link costs no space; a copy serves where the cache is on
    # another file system.
    ln -f "$cached/$bin" "$BIN/$bin" 2>/dev/null || cp -f "$cached/$bin" "$BIN/$bin"
  done
done
