#!/usr/bin/env bash
# Make sure a Compose implementation is there, for the test that runs the README's compose
# example (examples/standalone-server/compose.yaml). Prints the command to use: `docker
# compose` when Docker's plugin is installed, else `docker-compose`, Debian's package
# (Compose 1.29, which reads the Compose Specification without a `version:`), installed
# here when running as root and neither is present. Idempotent and quick when it is there.
set -euo pipefail

if docker compose version >/dev/null 2>&1; then
  echo "docker compose"
  exit 0
fi
if ! command -v docker-compose >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "docker compose is missing; install it: sudo apt-get install -y docker-compose" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends docker-compose >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends docker-compose >/dev/null
  }
fi
echo "docker-compose"
