#!/usr/bin/env bash
# A Prometheus Pushgateway for the metrics tests (tests/pushgateway.rs).
# Installs Debian's `prometheus-pushgateway` package when the binary is not on
# PATH (the package's service is not started: localstack/test.sh starts its
# own on loopback), then prints its version. Idempotent; run by
# localstack/test.sh.
#
#   bash localstack/install-pushgateway.sh
set -euo pipefail

if ! command -v prometheus-pushgateway >/dev/null 2>&1; then
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends prometheus-pushgateway
fi

prometheus-pushgateway --version 2>&1 | head -n 1
