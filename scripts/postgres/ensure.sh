#!/usr/bin/env bash
# Make sure Debian's PostgreSQL server (`postgresql`, 15 on Debian 12) is installed, for the
# Postgres store tests, the migration tests and the bench. Idempotent and quick when it is
# there; installs only when running as root and the binaries are missing. Prints the
# directory holding `initdb` and `postgres` (Debian keeps them out of PATH, under
# /usr/lib/postgresql/<version>/bin). Each test starts its own throwaway cluster in a
# temporary directory (testkit's `startPostgres`); the system service is never used.
set -euo pipefail

find_bin() {
  local initdb
  initdb="$(command -v initdb 2>/dev/null || true)"
  if [ -n "$initdb" ] && [ -x "$(dirname "$(readlink -f "$initdb")")/postgres" ]; then
    dirname "$(readlink -f "$initdb")"
    return 0
  fi
  # The newest version Debian installed.
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
    echo "$dir"
    return 0
  fi
  return 1
}

if ! find_bin >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL is missing; install it: sudo apt-get install -y postgresql" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends postgresql >/dev/null
  }
  # The package creates a `main` cluster and starts it where systemd runs; tests never use it.
fi
find_bin
