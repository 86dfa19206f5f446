#!/usr/bin/env bash
# make demo-down: stops exactly the processes make demo started (the PIDs
# recorded in its run folder, see down.sh).
#
#   test/stack/demo-down.sh
set -euo pipefail
export STACK_DIR=${STACK_DIR:-$(cd "$(dirname "$0")/../.." && pwd -P)/.run/demo}
if [ ! -d "$STACK_DIR/pids" ]; then
  echo ">> no demo in $STACK_DIR" >&2
  exit 0
fi
exec "$(dirname "$0")/down.sh"
