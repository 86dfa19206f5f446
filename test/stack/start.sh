#!/usr/bin/env bash
# Starts again processes of the stack stopped with down.sh NAME (for tests of
# an unreachable cluster), with the same command line, ports and data, and
# waits until each is ready.
#
#   test/stack/start.sh NAME...   (e.g. cluster-b-apiserver)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

if [ $# -eq 0 ]; then
  names=()
  for f in "$STACK_DIR"/cmd/*; do
    case "$f" in *.ready | *'*') ;; *) names+=("$(basename "$f")") ;; esac
  done
  stack_die "usage: $0 NAME... (names: ${names[*]})"
fi
for name in "$@"; do
  [ -x "$STACK_DIR/cmd/$name" ] || stack_die "no recorded command for $name in $STACK_DIR/cmd"
  stack_launch "$name"
done
for name in "$@"; do
  stack_wait_ready "$name" "${STACK_TIMEOUT:-90}"
  stack_log "$name running (pid $(stack_running "$name"))"
done
