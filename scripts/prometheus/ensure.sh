#!/usr/bin/env bash
# Make sure Debian's `prometheus` package is installed (it brings `prometheus` and `promtool`),
# for the metrics tests: each test starts its own Prometheus on loopback with a temporary
# config and data directory (testkit's `startPrometheus`). Idempotent and quick when it is
# there; installs only when running as root and a binary is missing. Prints the directory
# holding both binaries. The package's own system service is stopped and disabled: tests
# never use it, and it would listen on :9090.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "prometheus is missing; install it: sudo apt-get install -y prometheus" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null
  }
  # Where systemd runs, the package starts its service; stop it and keep it from coming back.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  elif command -v service >/dev/null 2>&1 && service prometheus status >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
  fi
fi
dirname "$(command -v promtool)"
