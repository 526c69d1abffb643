#!/usr/bin/env bash
# Run a command against the local silverline stack:
#
#   localstack/with-stack.sh CMD [ARGS...]
#
# Starts the stack (up.sh), exports the client environment (env.sh), runs the
# command, and ALWAYS stops the stack afterwards (down.sh, from an EXIT trap,
# also when up.sh or the command fails or the script is interrupted). Exits
# with the command's exit code (or up.sh's if the stack did not start).
# Note: a stack that was already running before is stopped too.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if (($# == 0)); then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi

# Stop the stack whatever happens; keep the exit status of what ran.
# shellcheck disable=SC2317  # invoked by the trap
cleanup() { "$here/down.sh" || true; }
trap cleanup EXIT
# Turn INT/TERM into a normal exit so the EXIT trap runs (exit 130 / 143).
trap 'exit 130' INT
trap 'exit 143' TERM

# up.sh prints `export` lines on stdout; env.sh gives the same environment.
"$here/up.sh" >/dev/null
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$here/env.sh"

rc=0
"$@" || rc=$?
exit "$rc"
