#!/usr/bin/env bash
# Runs a shell block of the documentation as it is, against a running stack:
# the block of FILE that the comment <!-- stack: NAME --> precedes, from the
# top of the repository, as the administrator of every cluster (see
# stack_doc_run in lib.sh). A VAR=VALUE replaces the block's own assignment
# of VAR, so a block written for one member or version serves another.
#
#   test/stack/doc.sh docs/upgrade.md upgrade version=v0.2.0
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

[ $# -ge 2 ] || stack_die "usage: $0 FILE NAME [VAR=VALUE...]"
stack_env_load
stack_doc_run "$@"
