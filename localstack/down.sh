#!/usr/bin/env bash
# Stop the local silverline stack started by up.sh: SIGTERM to the PID in the
# pid file, wait up to 10 s (weed usually exits in 2 to 4 s), then SIGKILL.
# Exits 0 when nothing was running. The data dir and log stay for inspection
# until the next up.sh (which starts from a fresh data dir).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

STOP_TIMEOUT=10

# Unix sockets weed leaves behind when it dies without a clean shutdown.
remove_leftovers() { rm -f "$PID_FILE" "$RUN_DIR/s3.sock" "$RUN_DIR/filer.sock"; }

if ! pid="$(stack_pid)"; then
  if [[ -f "$PID_FILE" ]]; then
    log "stale pid file removed (process $(cat "$PID_FILE" 2>/dev/null || true) is not running)"
    remove_leftovers
  else
    log "stack not running"
  fi
  exit 0
fi

log "stopping weed (pid $pid)"
kill -TERM "$pid" 2>/dev/null || true
deadline=$((SECONDS + STOP_TIMEOUT))
while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
  sleep 0.2
done
if kill -0 "$pid" 2>/dev/null; then
  log "still running after ${STOP_TIMEOUT}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
fi
remove_leftovers
log "stopped"
