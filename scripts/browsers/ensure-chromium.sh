#!/usr/bin/env bash
# Make sure a Chromium that playwright-core can drive is installed, the way
# scripts/engines/ensure.sh makes sure of the container engines: Playwright's own browser
# downloads are not reachable here, so the console's browser tests drive Debian's
# `chromium`. Prints the executable's path on stdout (and nothing else there).
#
#   bash scripts/browsers/ensure-chromium.sh      # → /usr/bin/chromium
#
# Idempotent: with Chromium present it only checks that it starts (well under a second).
# Every action is printed on stderr, prefixed "[browsers]". When Chromium is missing and we
# are root on Debian, it is installed with apt-get (package `chromium`); when not root, the
# script fails with what to do.
#
# Environment:
#   BERTH_CHROMIUM   a Chromium executable to use instead (checked, never installed)
set -euo pipefail

log() { echo "[browsers] $*" >&2; }
die() { echo "[browsers] ERROR: $*" >&2; exit 1; }

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
mkdir -p "$ROOT/.tmp"
# One installation at a time (several vitest projects may call this at once).
exec 9>"$ROOT/.tmp/.browsers.lock"
if ! flock -n 9; then
  log "another run holds the lock; waiting for it"
  flock 9
fi

find_chromium() {
  if [ -n "${BERTH_CHROMIUM:-}" ]; then echo "$BERTH_CHROMIUM"; return 0; fi
  for c in /usr/bin/chromium /usr/bin/chromium-browser; do
    if [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 1
}

if ! exe="$(find_chromium)"; then
  [ "$(id -u)" = 0 ] || die "chromium is not installed; as root run: apt-get install -y chromium (or set BERTH_CHROMIUM)"
  command -v apt-get >/dev/null || die "chromium is not installed and apt-get is missing: install Chromium and set BERTH_CHROMIUM"
  log "chromium is missing: installing Debian's package (apt-get install -y chromium)"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends chromium fonts-dejavu-core >&2; then
    log "apt-get install failed; refreshing the package lists (apt-get update) and trying again"
    apt-get update >&2
    apt-get install -y --no-install-recommends chromium fonts-dejavu-core >&2
  fi
  exe="$(find_chromium)" || die "apt-get installed chromium but no executable was found"
  log "installed $exe"
fi

version="$("$exe" --version 2>/dev/null)" || die "$exe does not start (--version failed)"
log "using $exe ($version)"
echo "$exe"
