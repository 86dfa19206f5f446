#!/usr/bin/env bash
# Prints the notes of a release from CHANGELOG.md: the body of the section
# headed "## VERSION - DATE", or of "## Unreleased" when no section has that
# version yet (a tag pushed before the changelog was cut).
#
#   package/release-notes.sh VERSION
#
# Exits 1 when the section it prints is empty.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: $0 VERSION" >&2; exit 2; }
version=$1
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
  { echo "release-notes.sh: VERSION $version is not a semantic version like v1.2.3" >&2; exit 2; }

# section PREFIX prints the lines between the first "## " heading that starts
# with PREFIX and the next "## " heading, without leading or trailing blank
# lines.
section() {
  awk -v prefix="$1" '
    /^## / { if (on) exit; if (index($0, prefix) == 1) { on = 1; next } }
    on { print }
  ' "$top/CHANGELOG.md" | sed -e '/./,$!d' | tac | sed -e '/./,$!d' | tac
}

notes=$(section "## $version - ")
[ -n "$notes" ] || notes=$(section '## Unreleased')
[ -n "$notes" ] || { echo "release-notes.sh: CHANGELOG.md has no notes for $version" >&2; exit 1; }
printf '%s\n' "$notes"
