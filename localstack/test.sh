#!/usr/bin/env bash
# The project's test command. Starts the local stacks on loopback (SeaweedFS
# `weed mini`: S3 + Iceberg REST catalog; LocalStack: S3; a Prometheus
# Pushgateway), installing them on a fresh machine, runs the whole suite
# (unit, embedded end-to-end, binary, S3 + REST, LocalStack lane), validates
# the deployment manifests (deploy/validate.sh) and stops the stacks even
# when tests fail.
#
#   bash localstack/test.sh                 # everything
#   bash localstack/test.sh --test cli      # extra arguments go to cargo test
#   SILVERLINE_SKIP_LOCALSTACK=1 bash localstack/test.sh   # without the LocalStack lane
#   SILVERLINE_PUSHGATEWAY_PORT=9091        # the Pushgateway's loopback port (default)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silverline-target}"
stack_home="${SILVERLINE_STACK_HOME:-$HOME/.cache/silverline-stack}"

pushgateway_pid=""
stop_pushgateway() {
  if [ -n "$pushgateway_pid" ]; then
    kill "$pushgateway_pid" 2>/dev/null || true
    wait "$pushgateway_pid" 2>/dev/null || true
  fi
}

# start_pushgateway: a fresh, in-memory Pushgateway on loopback for
# tests/pushgateway.rs, its URL exported as SILVERLINE_PUSHGATEWAY.
start_pushgateway() {
  local port="${SILVERLINE_PUSHGATEWAY_PORT:-9091}" log="$stack_home/pushgateway.log"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port 127.0.0.1:$port is already in use: set SILVERLINE_PUSHGATEWAY_PORT" >&2
    return 1
  fi
  mkdir -p "$stack_home"
  prometheus-pushgateway --web.listen-address="127.0.0.1:$port" --persistence.file="" >"$log" 2>&1 &
  pushgateway_pid=$!
  export SILVERLINE_PUSHGATEWAY="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    if curl -fsS "$SILVERLINE_PUSHGATEWAY/-/ready" >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$pushgateway_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "the Pushgateway did not start; last lines of $log:" >&2
  tail -n 20 "$log" >&2 || true
  return 1
}

stop_stacks() {
  stop_pushgateway
  bash localstack/down.sh || true
  [ -n "${SILVERLINE_SKIP_LOCALSTACK:-}" ] || bash localstack/localstack-down.sh || true
}
trap stop_stacks EXIT

# Build first, so that no server waits on the compiler.
cargo test --all-targets --no-run
# Headless Chromium for the browser tests (tests/report_browser.rs, the workbench in tests/serve.rs).
bash localstack/install-chromium.sh >/dev/null
export SILVERLINE_CHROMIUM="${SILVERLINE_CHROMIUM:-$(command -v chromium)}"
# A real Prometheus Pushgateway for the metrics tests (tests/pushgateway.rs).
bash localstack/install-pushgateway.sh >/dev/null
start_pushgateway

bash localstack/up.sh >/dev/null
# shellcheck source=localstack/env.sh
source localstack/env.sh
"$stack_home/venv/bin/python" -m pip install --quiet --disable-pip-version-check 'pyiceberg[pyarrow,sql-sqlite]==0.12.0'
export SILVERLINE_PYTHON="$stack_home/venv/bin/python"

# The deployment manifests, DAG and Dockerfile (prints `deploy: N passed, M failed`).
bash deploy/validate.sh

if [ -z "${SILVERLINE_SKIP_LOCALSTACK:-}" ]; then
  bash localstack/localstack-up.sh >/dev/null
  export SILVERLINE_LOCALSTACK_ENDPOINT="http://127.0.0.1:${SILVERLINE_LOCALSTACK_PORT:-4566}"
  cargo test --all-targets "$@" -- --include-ignored
else
  cargo test --all-targets "$@" -- --include-ignored --skip localstack_
fi
