#!/usr/bin/env bash
# Make gVisor (`runsc`, Debian's package) available to Docker and Podman as the OCI runtime
# named "runsc", for environments with `isolation: "gvisor"` (docs/ENVIRONMENTS.md).
#
#   bash scripts/gvisor/ensure.sh     # also run by scripts/engines/ensure.sh and .ci/run
#
# Idempotent: with everything in place it only compares two small files. Every action is
# printed on stderr, prefixed "[gvisor]". Needs root to install or register anything.
#
# runsc runs with `--network=host`: the sandbox uses the network namespace the engine made
# for the container (so Berth's egress rules on the engine's bridge still apply); runsc's
# own sandbox network (netstack) fails to start on this kernel. `--file-access=shared`: the
# engine writes into a running container's filesystem (Berth's putArchive, `docker cp`),
# which runsc's default (exclusive: cached, nobody else writes) would not show inside. The
# platform is this release's default, ptrace; no KVM access is needed.
#
# - Docker: a "runsc" entry in /etc/docker/daemon.json `runtimes` (with the flag as
#   `runtimeArgs`), then SIGHUP to a running dockerd, which reloads `runtimes` live.
# - Podman: containers.conf has no per-runtime flags (the global `--runtime-flag` would reach
#   runc too), so the runtime is a two-line wrapper adding the flag, registered in the
#   drop-in /etc/containers/containers.conf.d/berth-gvisor.conf; a Podman API service this
#   project started (scripts/engines/ensure.sh) is restarted to load it. Podman 4's API
#   ignores the runtime a create names, so a second API service whose default runtime is
#   runsc listens on $GVISOR_SOCKET; the Podman runtime creates gVisor containers there (the
#   same storage: the usual service starts, execs and removes them).
#
# Environment:
#   BERTH_GVISOR=off   do nothing (a machine that will not run gVisor)
set -euo pipefail

log() { echo "[gvisor] $*" >&2; }
die() { echo "[gvisor] ERROR: $*" >&2; exit 1; }

[ "${BERTH_GVISOR:-on}" = off ] && { log "BERTH_GVISOR=off: skipped"; exit 0; }

RUNSC=/usr/bin/runsc
WRAPPER=/usr/local/lib/berth/runsc-host
DAEMON_JSON="${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}"
PODMAN_DROPIN=/etc/containers/containers.conf.d/berth-gvisor.conf
PODMAN_PIDFILE=/run/berth-podman-service.pid
GVISOR_SOCKET=/run/podman/podman-gvisor.sock
GVISOR_PIDFILE=/run/berth-podman-gvisor.pid
RUNSC_FLAGS="--network=host --file-access=shared"
RUNSC_ARGS='["--network=host","--file-access=shared"]'

is_root() { [ "$(id -u)" = 0 ]; }

# Writes stdin to $1 when different; returns 0 when it changed the file.
write_if_changed() {
  local tmp
  tmp="$(mktemp)"
  cat >"$tmp"
  if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; return 1; fi
  mkdir -p "$(dirname "$1")"
  mv "$tmp" "$1"
  chmod 644 "$1"
  return 0
}

if [ ! -x "$RUNSC" ]; then
  is_root || die "runsc is missing and installing it needs root (run: sudo apt-get install -y runsc)"
  command -v apt-get >/dev/null || die "no apt-get: install gVisor's runsc at $RUNSC yourself"
  log "apt-get install runsc"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >&2 || {
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >&2
  }
fi
is_root || { log "not root: leaving the engines' runtime registration as it is"; exit 0; }

# ---------------------------------------------------------------- docker
# Merge the entry into daemon.json (other keys kept); node is what every Berth machine has.
if docker_changed="$(node -e '
  const fs = require("node:fs")
  const [file, path, args] = process.argv.slice(1)
  let conf = {}
  try { conf = JSON.parse(fs.readFileSync(file, "utf8")) } catch (err) { if (err.code !== "ENOENT") throw err }
  const want = { path, runtimeArgs: JSON.parse(args) }
  if (JSON.stringify(conf.runtimes?.runsc) === JSON.stringify(want)) { console.log("same"); process.exit(0) }
  conf.runtimes = { ...conf.runtimes, runsc: want }
  fs.mkdirSync(require("node:path").dirname(file), { recursive: true })
  fs.writeFileSync(file + ".tmp", JSON.stringify(conf, null, 2) + "\n")
  fs.renameSync(file + ".tmp", file)
  console.log("changed")
' "$DAEMON_JSON" "$RUNSC" "$RUNSC_ARGS")" && [ "$docker_changed" = changed ]; then
  log "docker: registered runsc in $DAEMON_JSON"
  if pid="$(pgrep -x dockerd)"; then
    log "docker: SIGHUP to dockerd (pid $pid) to reload its runtimes"
    kill -HUP $pid
    sleep 0.5
  fi
fi

# ---------------------------------------------------------------- podman
if write_if_changed "$WRAPPER" <<EOF2
#!/bin/sh
# Written by Berth's scripts/gvisor/ensure.sh: runsc in the network namespace Podman made.
exec $RUNSC $RUNSC_FLAGS "\$@"
EOF2
then
  chmod 755 "$WRAPPER"
  log "podman: wrote $WRAPPER"
fi
if write_if_changed "$PODMAN_DROPIN" <<EOF2
# Written by Berth's scripts/gvisor/ensure.sh: gVisor for isolation "gvisor".
[engine.runtimes]
runsc = ["$WRAPPER"]
EOF2
then
  dropin_changed=1
  log "podman: registered runsc in $PODMAN_DROPIN"
  pid="$(cat "$PODMAN_PIDFILE" 2>/dev/null || true)"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    # scripts/engines/ensure.sh starts it again (it runs after this script).
    log "podman: stopping the API service started by scripts/engines/ensure.sh (pid $pid) so it loads runsc"
    kill "$pid"
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  elif [ -S /run/podman/podman.sock ]; then
    log "podman: restart the Podman API service to load $PODMAN_DROPIN"
  fi
fi

ping_socket() { [ -S "$1" ] && curl -fsS --max-time 3 --unix-socket "$1" http://engine/_ping >/dev/null 2>&1; }
if command -v podman >/dev/null; then
  pid="$(cat "$GVISOR_PIDFILE" 2>/dev/null || true)"
  if [ "${dropin_changed:-0}" = 1 ] && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  fi
  if ! ping_socket "$GVISOR_SOCKET"; then
    log "podman: starting 'podman --runtime runsc system service' on $GVISOR_SOCKET (log: /var/log/berth-podman-gvisor.log)"
    mkdir -p "$(dirname "$GVISOR_SOCKET")"
    rm -f "$GVISOR_SOCKET"
    (cd / && exec setsid nohup podman --runtime runsc system service --time=0 "unix://$GVISOR_SOCKET" \
      >/var/log/berth-podman-gvisor.log 2>&1 </dev/null) 9>&- &
    echo $! >"$GVISOR_PIDFILE"
    for _ in $(seq 120); do ping_socket "$GVISOR_SOCKET" && break; sleep 0.25; done
    ping_socket "$GVISOR_SOCKET" || die "podman: the gVisor API service would not start (see /var/log/berth-podman-gvisor.log)"
  fi
fi
exit 0
