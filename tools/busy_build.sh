#!/usr/bin/env bash
# Another build on the same machine, over and over, until killed: a copy of examples/
# built with examples/unit_build.yaml in a fresh temporary directory each time. Used to
# check that `make test` passes while other builds run (issue 26):
#   tools/busy_build.sh "$PWD/.venv" "$PWD" & make test; kill %1
set -u
VENV=$1
SRC=$2
LOG=${BUSY_LOG:-/tmp/busy.log}
while true; do
  d=$(mktemp -d /tmp/busy.XXXXXX)
  cp -r "$SRC/examples" "$d/"
  (cd "$d" && "$VENV/bin/mintdim-beam" build examples/unit_build.yaml > /dev/null 2>&1)
  echo "$(date +%T) build rc=$?" >> "$LOG"
  rm -rf "$d"
done
