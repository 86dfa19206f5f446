#!/usr/bin/env bash
# Builds the named tools (folders of this directory) into $BIN (default
# .cache/bin at the top of the repository). Each tool is a small Go module
# with a BUILD file of lines "<binary> <package> [go build flags...]". A tool
# is rebuilt only when its folder's files or the Go version change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BIN=${BIN:-$top/.cache/bin}
mkdir -p "$BIN"
[ $# -gt 0 ] || set -- $(cd "$here" && ls -d */ | tr -d /)
for tool in "$@"; do
  dir=$here/$tool
  [ -f "$dir/BUILD" ] || { echo "build.sh: no tool $tool" >&2; exit 2; }
  sum=$( (go version; cd "$dir" && find . -type f ! -name '*.test' | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)
  stamp=$BIN/.$tool.stamp
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    continue
  fi
  start=$(date +%s)
  echo ">> building $tool (cached in $BIN; first build takes minutes)" >&2
  while read -r bin pkg flags; do
    case "$bin" in ''|'#'*) continue ;; esac
    # shellcheck disable=SC2086 # flags are words on purpose
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath $flags -o "$BIN/$bin" "$pkg")
  done < "$dir/BUILD"
  echo "$sum" > "$stamp"
  echo ">> built $tool in $(( $(date +%s) - start ))s" >&2
done
