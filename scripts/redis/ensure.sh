#!/usr/bin/env bash
# Make sure `redis-server` (Debian's package) is installed, for the Redis store tests and
# bench. Idempotent; installs only when running as root and the binary is missing.
# Prints the binary's path. Each test starts its own server on a temporary unix socket.
set -euo pipefail
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "redis-server is missing; install it: sudo apt-get install -y redis-server" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends redis-server >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends redis-server >/dev/null
  }
  # The package starts a system service on :6379 where systemd runs; tests never use it.
fi
command -v redis-server
