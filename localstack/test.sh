#!/usr/bin/env bash
# The project's test command: runs the whole suite (unit, embedded end-to-end,
# binary). Usage: bash localstack/test.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/silverline-target}"
cargo test --all-targets "$@"
