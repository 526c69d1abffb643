#!/usr/bin/env bash
# Start LocalStack (S3 only) WITHOUT Docker, on 127.0.0.1:4566, for users who
# want LocalStack's S3 rather than weed's. LocalStack has no Iceberg catalog:
# pair it with the SQL (SQLite) catalog, or use the weed stack (up.sh) or the
# docker-compose file for a REST catalog.
#
#   localstack/localstack-up.sh        # install if needed, start, wait until ready
#   localstack/localstack-down.sh      # stop
#
# Installs localstack-core (pinned, plus the pins it needs to start) into its
# own venv under the stack home with a Python >= 3.12 interpreter (3.11 fails
# to start without saying why). Exits 3 if no such interpreter is found; point
# SILVERLINE_LOCALSTACK_PYTHON at one to choose it.
#
# It runs the hypercorn gateway: the default gateway binds 0.0.0.0 whatever
# GATEWAY_LISTEN says, hypercorn honours 127.0.0.1. After start the script
# checks with `ss` that every listening socket of the process is on loopback
# and kills it otherwise. Buckets bronze, lake and warehouse are created.
# Any access key is accepted; status goes to stderr, `export` lines to stdout.
#
# Environment (optional):
#   SILVERLINE_STACK_HOME          install/run dir (default ~/.cache/silverline-stack)
#   SILVERLINE_LOCALSTACK_PORT     gateway port (4566)
#   SILVERLINE_LOCALSTACK_PYTHON   interpreter for the venv (default: newest >= 3.12 found)
#   SILVERLINE_STACK_TIMEOUT       seconds to wait for readiness (60)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/common.sh"

LS_VERSION="2026.3.0"
# Pins it needs to start (newer cbor2/pyopenssl/cryptography break it).
LS_PINS=("cbor2<6" "pyopenssl<25" "cryptography<45" "service-identity")
LS_PORT="${SILVERLINE_LOCALSTACK_PORT:-4566}"
LS_URL="http://127.0.0.1:$LS_PORT"
LS_VENV="$STACK_HOME/localstack-venv"
LS_STAMP="$LS_VENV/.silverline-installed"
# LocalStack's own file tree (host mode). Its cache (service catalog, test
# certificate) is kept between runs; its tmp (where the state lives when
# PERSISTENCE is off) is wiped at each start.
LS_FS="$STACK_HOME/localstack-fs"
LS_PID_FILE="$RUN_DIR/localstack.pid"
LS_LOG="$RUN_DIR/localstack.log"
LS_BUCKETS=(bronze lake warehouse)
READY_TIMEOUT="${SILVERLINE_STACK_TIMEOUT:-60}"

# ls_pid: PID from the pid file if alive and a Python process; else return 1.
ls_pid() {
  local pid comm
  [[ -f "$LS_PID_FILE" ]] || return 1
  pid="$(cat "$LS_PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  comm="$(ps -p "$pid" -o comm= 2>/dev/null || true)"
  [[ "${comm##*/}" == python* ]] || return 1
  printf '%s\n' "$pid"
}

# ls_ready: /_localstack/health reports s3 "running".
ls_ready() {
  curl -fsS --max-time 2 "$LS_URL/_localstack/health" 2>/dev/null |
    grep -Eq '"s3"[[:space:]]*:[[:space:]]*"(running|available)"'
}

# find_python: newest interpreter >= 3.12: $SILVERLINE_LOCALSTACK_PYTHON, else
# pyenv's versions, else python3.13 / python3.12 / python3 on PATH.
find_python() {
  local candidates=() c
  if [[ -n "${SILVERLINE_LOCALSTACK_PYTHON:-}" ]]; then
    candidates=("$SILVERLINE_LOCALSTACK_PYTHON")
  else
    # Newest first (version sort, reversed).
    while IFS= read -r c; do candidates+=("$c"); done < <(
      for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3; do
        [[ -x "$c" ]] && printf '%s\n' "$c"
      done | sort -rV)
    for c in python3.14 python3.13 python3.12 python3; do
      command -v "$c" >/dev/null 2>&1 && candidates+=("$(command -v "$c")")
    done
  fi
  for c in ${candidates[@]+"${candidates[@]}"}; do
    if "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      printf '%s\n' "$c"
      return 0
    fi
  done
  return 1
}

# print_ls_exports: client environment for LocalStack S3 (any key works; the
# same dev keys as the weed stack are used for uniformity).
print_ls_exports() {
  printf 'export SILVERLINE_S3_ENDPOINT=%q\n' "$LS_URL"
  printf 'export AWS_ACCESS_KEY_ID=%q\n' "$SILVERLINE_S3_ACCESS_KEY"
  printf 'export AWS_SECRET_ACCESS_KEY=%q\n' "$SILVERLINE_S3_SECRET_KEY"
  printf 'export AWS_REGION=%q\n' "$SILVERLINE_S3_REGION"
}

# kill_tree PID: SIGKILL PID and its descendants, each by its own id
# (children first are collected before the parent dies).
kill_tree() {
  local pid="$1" child
  for child in $(pgrep -P "$pid" 2>/dev/null || true); do kill_tree "$child"; done
  kill -KILL "$pid" 2>/dev/null || true
}

for tool in curl ps ss pgrep sed; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is required but not found"
done
mkdir -p "$RUN_DIR"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$STACK_HOME/.localstack.lock"
  flock -w 600 9 || die "another localstack-up.sh holds the lock"
fi

# --- already running? ----------------------------------------------------------
if pid="$(ls_pid)" && ls_ready; then
  log "LocalStack already running (pid $pid) and ready at $LS_URL"
  print_ls_exports
  exit 0
fi
if pid="$(ls_pid)"; then
  die "LocalStack (pid $pid) is running but not ready; run localstack/localstack-down.sh"
fi
rm -f "$LS_PID_FILE"
if (exec 3<>"/dev/tcp/127.0.0.1/$LS_PORT") 2>/dev/null; then
  die "port 127.0.0.1:$LS_PORT is already in use (set SILVERLINE_LOCALSTACK_PORT)"
fi

# --- install (idempotent) -------------------------------------------------------
want="localstack-core[runtime]==$LS_VERSION ${LS_PINS[*]}"
if [[ -x "$LS_VENV/bin/python" ]] && [[ "$(cat "$LS_STAMP" 2>/dev/null || true)" == "$want" ]] &&
  "$LS_VENV/bin/python" -c 'import localstack' >/dev/null 2>&1; then
  :
else
  if ! py="$(find_python)"; then
    log "ERROR: LocalStack $LS_VERSION needs Python >= 3.12 (with the venv module) and none was found"
    log "       (looked in ${PYENV_ROOT:-$HOME/.pyenv}/versions and for python3.1x on PATH);"
    log "       install one or set SILVERLINE_LOCALSTACK_PYTHON=/path/to/python3.12"
    exit 3
  fi
  log "installing localstack-core==$LS_VERSION into $LS_VENV with $py ($("$py" -V 2>&1))"
  started=$SECONDS
  rm -rf "$LS_VENV"
  "$py" -m venv "$LS_VENV" || die "$py -m venv failed"
  # One resolve with the pins: a consistent set (`pip check` clean; installing
  # the pins afterwards leaves joserfc wanting cryptography>=45).
  "$LS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "localstack-core[runtime]==$LS_VERSION" "${LS_PINS[@]}" >&2 ||
    die "pip install localstack-core failed"
  printf '%s\n' "$want" >"$LS_STAMP"
  log "installed in $((SECONDS - started))s"
fi

# --- start ---------------------------------------------------------------------------
rm -rf "$LS_FS/tmp"
mkdir -p "$LS_FS"
log "starting LocalStack $LS_VERSION (S3 only) on $LS_URL (log $LS_LOG)"
started=$SECONDS
# GATEWAY_SERVER=hypercorn: the only gateway that binds just 127.0.0.1.
# DNS_ADDRESS=0: no DNS server. EAGER_SERVICE_LOADING: S3 loaded at start.
# SKIP_SSL_CERT_DOWNLOAD / DISABLE_EVENTS: nothing is fetched from outside.
# OVERRIDE_IN_DOCKER=0: this sandbox looks like a container to LocalStack,
# which then writes to /var/lib/localstack and /etc/localstack (and defaults
# to 0.0.0.0); host mode keeps its files under FILESYSTEM_ROOT ($LS_FS). S3 object
# data still goes to the hard-coded /tmp/localstack-s3-storage.
# Its file tree is the working dir so anything written relative lands there.
(
  cd "$LS_FS"
  exec env \
    GATEWAY_LISTEN="127.0.0.1:$LS_PORT" GATEWAY_SERVER=hypercorn \
    SERVICES=s3 EAGER_SERVICE_LOADING=1 DNS_ADDRESS=0 \
    SKIP_SSL_CERT_DOWNLOAD=1 DISABLE_EVENTS=1 \
    LOCALSTACK_HOST="127.0.0.1:$LS_PORT" \
    OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT="$LS_FS" \
    nohup "$LS_VENV/bin/python" -m localstack.runtime.main
) </dev/null >"$LS_LOG" 2>&1 9>&- &
pid=$!
printf '%s\n' "$pid" >"$LS_PID_FILE"

fail() {
  log "ERROR: $1"
  log "last lines of $LS_LOG:"
  tail -n 40 "$LS_LOG" >&2 || true
  kill_tree "$pid"
  rm -f "$LS_PID_FILE"
  exit 1
}

deadline=$((SECONDS + READY_TIMEOUT))
until ls_ready; do
  kill -0 "$pid" 2>/dev/null || fail "LocalStack exited during startup"
  ((SECONDS < deadline)) || fail "LocalStack not ready after ${READY_TIMEOUT}s"
  sleep 0.25
done

# Loopback only, or it does not stay up: every TCP/UDP listener of the process
# tree must be on 127.0.0.0/8 or [::1].
pids="$pid $(pgrep -P "$pid" 2>/dev/null | tr '\n' ' ' || true)"
bad=""
for p in $pids; do
  bad+="$(ss -Hltunp 2>/dev/null | grep -F "pid=$p," | awk '{print $5}' |
    grep -Ev '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):' || true)"
done
[[ -z "$bad" ]] || fail "LocalStack listens beyond loopback (${bad//$'\n'/ }); killed"

# Buckets (LocalStack accepts any signature; the dev keys are used anyway).
for bucket in "${LS_BUCKETS[@]}"; do
  code="$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -X PUT \
    --aws-sigv4 "aws:amz:${SILVERLINE_S3_REGION}:s3" \
    --user "$SILVERLINE_S3_ACCESS_KEY:$SILVERLINE_S3_SECRET_KEY" \
    "$LS_URL/$bucket" || true)"
  [[ "$code" == 200 || "$code" == 409 ]] || fail "creating bucket $bucket: HTTP $code"
done

log "LocalStack ready in $((SECONDS - started))s (pid $pid); stop with localstack/localstack-down.sh"
print_ls_exports
