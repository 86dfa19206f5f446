#!/usr/bin/env bash
# Prints the resident memory of every running process of the stack, and the
# total.
#
#   test/stack/rss.sh
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

total=0
printf '%-24s %8s %10s\n' PROCESS PID RSS_MB
for f in "$STACK_DIR"/pids/*.pid; do
  [ -e "$f" ] || continue
  name=$(basename "$f" .pid)
  pid=$(stack_running "$name") || continue
  kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
  total=$((total + kb))
  printf '%-24s %8s %10.1f\n' "$name" "$pid" "$(echo "$kb / 1024" | bc -l)"
done
printf '%-24s %8s %10.1f\n' total "" "$(echo "$total / 1024" | bc -l)"
