#!/usr/bin/env bash
# Builds the named tools (folders of this directory) into $BIN (default
# .cache/bin at the top of the repository). Each tool is a small Go module
# with a BUILD file of lines "<binary> <package> [go build flags...]"; the
# package may be a path inside the tool's own module (e.g. ./kube-apiserver),
# and a flag holding spaces is quoted ('-ldflags=-X a=1 -X b=2'). A tool is
# rebuilt only when its folder's files or the Go version change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
BIN=${BIN:-$top/.cache/bin}
mkdir -p "$BIN"
if [ $# -eq 0 ]; then
  for d in "$here"/*/; do
    d=${d%/}
    set -- "$@" "${d##*/}"
  done
fi
for tool in "$@"; do
  dir=$here/$tool
  [ -f "$dir/BUILD" ] || { echo "build.sh: no tool $tool" >&2; exit 2; }
  sum=$( (go version; cd "$dir" && find . -type f ! -name '*.test' | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16)
  stamp=$BIN/.$tool.stamp
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then
    missing=
    while read -r bin _; do
      case "$bin" in ''|'#'*) continue ;; esac
      [ -x "$BIN/$bin" ] || missing=1
    done < "$dir/BUILD"
    [ -n "$missing" ] || continue
  fi
  start=$(date +%s)
  echo ">> building $tool (cached in $BIN; first build takes minutes)" >&2
  while read -r bin pkg flags; do
    case "$bin" in ''|'#'*) continue ;; esac
    args=()
    if [ -n "${flags:-}" ]; then
      # xargs splits the flags like a shell would, honouring quotes.
      mapfile -t args < <(printf '%s\n' "$flags" | xargs -n1 printf '%s\n')
    fi
    (cd "$dir" && CGO_ENABLED=0 go build -trimpath "${args[@]}" -o "$BIN/$bin" "$pkg")
  done < "$dir/BUILD"
  echo "$sum" > "$stamp"
  echo ">> built $tool in $(( $(date +%s) - start ))s" >&2
done
