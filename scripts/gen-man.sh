#!/usr/bin/env bash
# Regenerates the man pages from miotool's command tree: one page per
# command, section 1, titled by the command (MIOTOOL-CAPTURE(1)), written by
# the hidden `miotool gen-man` (its own roff writer in internal/cmd/genman).
# Run it after changing a command's flags or help text; .ci/run fails when
# man/ is not what this script writes, or when mandoc warns about a page.
#
# Usage: scripts/gen-man.sh [DIR]    (default: man)
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${1:-man}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# A config file or MIOTOOL_* variable must not leak into the pages: the
# pages show the built-in defaults either way, but a broken config file
# would stop the command.
MIOTOOL_CONFIG=/dev/null go run ./cmd/miotool gen-man "$tmp/pages"

mkdir -p "$dir"
rm -f "$dir"/*.1
cp "$tmp"/pages/*.1 "$dir"/
echo "wrote $(ls "$tmp"/pages/*.1 | wc -l) man pages to $dir/"
