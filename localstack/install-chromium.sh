#!/usr/bin/env bash
# Headless Chromium for the report's browser tests (tests/report_browser.rs).
# Installs Debian's `chromium` package when `chromium` is not on PATH, then
# prints its version. Idempotent; run by localstack/test.sh.
#
#   bash localstack/install-chromium.sh
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends chromium
fi

chromium --version
