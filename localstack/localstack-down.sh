#!/usr/bin/env bash
# Stop the LocalStack started by localstack-up.sh. Its hypercorn gateway does
# not reliably exit on SIGTERM, so it is stopped with SIGKILL (its state is
# throwaway: nothing is persisted). Child processes, if any, are killed by
# their own PIDs. Exits 0 when nothing was running.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

LS_PID_FILE="$RUN_DIR/localstack.pid"
# LocalStack's S3 keeps object data in this hard-coded directory.
LS_S3_TMP="/tmp/localstack-s3-storage"

# kill_tree PID: SIGKILL PID and its descendants, each by its own id.
kill_tree() {
  local pid="$1" child
  for child in $(pgrep -P "$pid" 2>/dev/null || true); do kill_tree "$child"; done
  kill -KILL "$pid" 2>/dev/null || true
}

pid="$(cat "$LS_PID_FILE" 2>/dev/null || true)"
comm=""
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
  comm="$(ps -p "$pid" -o comm= 2>/dev/null || true)"
fi
if [[ "${comm##*/}" != python* ]]; then
  if [[ -f "$LS_PID_FILE" ]]; then
    log "stale LocalStack pid file removed"
    rm -f "$LS_PID_FILE"
  else
    log "LocalStack not running"
  fi
  exit 0
fi

log "stopping LocalStack (pid $pid) with SIGKILL"
kill_tree "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
rm -f "$LS_PID_FILE"
# Remove its S3 scratch data unless another LocalStack is still using it.
if ! pgrep -f 'localstack[.]runtime[.]main' >/dev/null 2>&1; then
  rm -rf "$LS_S3_TMP"
fi
log "LocalStack stopped"
