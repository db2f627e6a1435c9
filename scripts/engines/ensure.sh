#!/usr/bin/env bash
# Make sure the container engines Berth's engine test suites need are installed, running
# and answering, and that the local test image exists in each; then write what was found
# to a JSON file the tests (and the bench) read.
#
#   bash scripts/engines/ensure.sh                # docker and podman
#   BERTH_ENGINES=podman bash scripts/engines/ensure.sh
#
# Idempotent: a second run with everything up only pings the sockets and checks the image
# label (well under a second). Every action it takes is printed on stderr, prefixed
# "[engines]". When an engine is missing and we are root on Debian, it is installed from
# Debian's packages (docker.io, podman); when not root, the script fails with what to do.
# No registry is used: the test image is a rootfs of the host's node, the libraries `ldd`
# lists and busybox, imported with `docker import` / `podman import`. For the agent runner
# (@berth/runner) it also holds bash (Claude Code's Bash tool needs bash or zsh; busybox
# has neither) and librt.so.1 (linked by Claude Code's native binary, not by node), and
# for tasks that clone over HTTPS the host's git (installed from Debian when missing):
# `git`, `git-remote-http(s)`, git-core's links and templates, and the libraries they link.
#
# Environment:
#   BERTH_ENGINES        engines to ensure, space separated (default "docker podman"; "local":
#                        only bubblewrap, which every run ensures)
#   BERTH_ENGINES_DIR    where to write <engine>.json (default <repo>/.tmp/engines)
#   BERTH_TEST_IMAGE     image repository:tag to build (default berth-test:latest)
#   DOCKER_SOCKET        docker socket (default /var/run/docker.sock)
#   PODMAN_SOCKET        podman API socket (default /run/podman/podman.sock)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
ENGINES="${BERTH_ENGINES:-docker podman}"
OUT_DIR="${BERTH_ENGINES_DIR:-$ROOT/.tmp/engines}"
IMAGE="${BERTH_TEST_IMAGE:-berth-test:latest}"
DOCKER_SOCKET="${DOCKER_SOCKET:-/var/run/docker.sock}"
PODMAN_SOCKET="${PODMAN_SOCKET:-/run/podman/podman.sock}"
PODMAN_PIDFILE=/run/berth-podman-service.pid
# Bump when the image recipe below changes, so existing images are rebuilt.
RECIPE_VERSION=4
WAIT_SECONDS=90

log() { echo "[engines] $*" >&2; }
die() { echo "[engines] ERROR: $*" >&2; exit 1; }

# One provisioning at a time (vitest projects may call this concurrently). Daemons started
# below get `9>&-` so they do not inherit (and hold) the lock.
mkdir -p "$OUT_DIR"
LOCK="$OUT_DIR/.lock"
exec 9>"$LOCK"
if ! flock -n 9; then
  log "another provisioning run holds $LOCK; waiting for it"
  flock 9
fi

is_root() { [ "$(id -u)" = 0 ]; }

# ping SOCKET → 0 when the Engine API on that unix socket answers /_ping.
ping_socket() {
  [ -S "$1" ] || return 1
  curl -fsS --max-time 3 --unix-socket "$1" http://engine/_ping >/dev/null 2>&1
}

wait_socket() { # wait_socket NAME SOCKET LOGFILE
  local i
  for ((i = 0; i < WAIT_SECONDS * 4; i++)); do
    if ping_socket "$2"; then log "$1 answers on $2"; return 0; fi
    sleep 0.25
  done
  log "$1 did not answer on $2 within ${WAIT_SECONDS}s; last lines of $3:"
  tail -n 30 "$3" >&2 || true
  return 1
}

APT_UPDATED=0
apt_install() { # apt_install PKG...
  is_root || die "need root to install $* (run: sudo apt-get install -y $*), or start an engine yourself"
  command -v apt-get >/dev/null || die "no apt-get: install $* with your system's package manager"
  if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2
}

missing_pkgs() { # prints the packages among $@ that dpkg does not have installed
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

command -v curl >/dev/null || apt_install curl ca-certificates

# ---------------------------------------------------------------- docker
ensure_docker() {
  if ping_socket "$DOCKER_SOCKET"; then
    log "docker: engine answers on $DOCKER_SOCKET"
    return 0
  fi
  if ! command -v dockerd >/dev/null; then
    log "docker: no dockerd on this machine"
    apt_install docker.io
  fi
  is_root || die "docker: dockerd is installed but not answering on $DOCKER_SOCKET, and starting it needs root"
  if pgrep -x dockerd >/dev/null; then
    log "docker: dockerd runs (pid $(pgrep -x dockerd | tr '\n' ' ')) but does not answer yet; waiting"
  else
    log "docker: starting dockerd in the background (log: /var/log/berth-dockerd.log)"
    rm -f /var/run/docker.pid
    # From /: a daemon keeps the directory it started in, and its shims fail once that is deleted.
    (cd / && exec setsid nohup dockerd >/var/log/berth-dockerd.log 2>&1 </dev/null) 9>&- &
  fi
  wait_socket docker "$DOCKER_SOCKET" /var/log/berth-dockerd.log || die "docker: engine would not start"
}

# ---------------------------------------------------------------- podman
write_containers_conf() {
  local n conf tmp
  n="$(ulimit -Hn)"
  [ "$n" = unlimited ] && n=1048576
  conf=/etc/containers/containers.conf
  tmp="$(mktemp)"
  cat >"$tmp" <<EOF
# Written by Berth's scripts/engines/ensure.sh for rootful Podman on this machine.
[containers]
default_ulimits = ["nofile=$n:$n", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
exit_command_delay = 5
EOF
  if [ -f "$conf" ] && cmp -s "$tmp" "$conf"; then
    rm -f "$tmp"
    return 1 # unchanged
  fi
  log "podman: writing $conf (nofile=$n:$n, runc, cgroupfs, file events)"
  mkdir -p /etc/containers
  mv "$tmp" "$conf"
  chmod 644 "$conf"
  return 0 # changed
}

ensure_podman() {
  local changed=0 pkgs
  if is_root; then
    pkgs="$(missing_pkgs podman runc crun catatonit uidmap slirp4netns netavark aardvark-dns iptables)"
    if [ -n "$pkgs" ]; then
      log "podman: missing packages: $(echo $pkgs)"
      apt_install $pkgs
    fi
    write_containers_conf && changed=1
  fi
  if ping_socket "$PODMAN_SOCKET"; then
    if [ "$changed" = 0 ]; then
      log "podman: API answers on $PODMAN_SOCKET"
      return 0
    fi
    local pid
    pid="$(cat "$PODMAN_PIDFILE" 2>/dev/null || true)"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      log "podman: containers.conf changed; restarting the API service this script started (pid $pid)"
      kill "$pid"
      for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    else
      log "podman: containers.conf changed, but the API service on $PODMAN_SOCKET was not started here; restart it to apply"
      return 0
    fi
  fi
  command -v podman >/dev/null || die "podman: not installed (apt-get install podman), and not root to install it"
  is_root || die "podman: rootful socket $PODMAN_SOCKET not answering; start it with: podman system service --time=0 unix://$PODMAN_SOCKET"
  mkdir -p "$(dirname "$PODMAN_SOCKET")"
  rm -f "$PODMAN_SOCKET"
  log "podman: starting 'podman system service --time=0 unix://$PODMAN_SOCKET' in the background (log: /var/log/berth-podman.log)"
  # From /: conmon inherits the service's directory and fails ("write child: broken pipe") once it is deleted.
  (cd / && exec setsid nohup podman system service --time=0 "unix://$PODMAN_SOCKET" >/var/log/berth-podman.log 2>&1 </dev/null) 9>&- &
  echo $! >"$PODMAN_PIDFILE"
  wait_socket podman "$PODMAN_SOCKET" /var/log/berth-podman.log || die "podman: API service would not start"
}

# ---------------------------------------------------------------- test image
recipe_hash() {
  [ -z "$(missing_pkgs busybox-static)" ] || apt_install busybox-static
  command -v git >/dev/null || apt_install git
  local node bb
  node="$(command -v node)"
  bb="$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null || echo none)"
  printf '%s|%s|%s|%s|%s' "$RECIPE_VERSION" "$(node --version)" "$(sha256sum "$(readlink -f "$node")" | cut -c1-16)" "$bb" \
    "$(sha256sum "$(readlink -f "$(command -v bash)")" | cut -c1-16)$(sha256sum "$(readlink -f "$(command -v git)")" | cut -c1-16)" |
    sha256sum | cut -c1-16
}

ROOTFS_TAR=""
build_rootfs() { # builds the rootfs tarball once per run, into $ROOTFS_TAR
  [ -n "$ROOTFS_TAR" ] && return 0
  local dir node bash lib libdir
  dir="$(mktemp -d /tmp/berth-rootfs.XXXXXX)"
  node="$(readlink -f "$(command -v node)")"
  bash="$(readlink -f "$(command -v bash)")"
  log "image: building rootfs in $dir (node $(node --version) + bash + $({ ldd "$node"; ldd "$bash"; } | grep -o '/[^ ]*' | sort -u | wc -l) libraries + librt + busybox)"
  mkdir -p "$dir"/{bin,usr/bin,usr/local/bin,etc,tmp,root,workspace,proc,sys,dev}
  chmod 1777 "$dir/tmp"
  cp /bin/busybox "$dir/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$dir/bin/$applet"
  done
  cp "$node" "$dir/usr/local/bin/node"
  cp "$bash" "$dir/bin/bash"
  for lib in $({ ldd "$node"; ldd "$bash"; } | grep -o '/[^ ]*' | sort -u); do
    cp -L --parents "$lib" "$dir/"
  done
  # librt.so.1 sits beside libc.so.6; Claude Code's native binary needs it.
  libdir="$(dirname "$(ldd "$node" | grep -o '/[^ ]*libc\.so\.6')")"
  cp -L --parents "$libdir/librt.so.1" "$dir/"
  # git: the binary, its HTTPS transport and every link to them in the exec path (the
  # other helpers there need perl or are servers), the templates, and their libraries.
  local gitcore
  gitcore="$(git --exec-path)"
  mkdir -p "$dir$gitcore" "$dir/usr/share/git-core"
  cp "$gitcore/git" "$gitcore/git-remote-http" "$dir$gitcore/"
  find "$gitcore" -maxdepth 1 -type l -exec cp -P {} "$dir$gitcore/" \;
  cp -r /usr/share/git-core/templates "$dir/usr/share/git-core/" 2>/dev/null || true
  ln -sf "$gitcore/git" "$dir/usr/bin/git"
  for lib in $({ ldd "$gitcore/git"; ldd "$gitcore/git-remote-http"; } | grep -o '/[^ ]*' | sort -u); do
    [ -e "$dir$lib" ] || cp -L --parents "$lib" "$dir/"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n' >"$dir/etc/group"
  mkdir -p "$dir/home/node" && chown 1000:1000 "$dir/home/node"
  # The agent user owns /workspace from the start (label below): no chown per container.
  chown 1000:1000 "$dir/workspace"
  ROOTFS_TAR="$(mktemp /tmp/berth-rootfs.XXXXXX.tar)"
  tar -C "$dir" -cf "$ROOTFS_TAR" .
  rm -rf "$dir"
}

ensure_image() { # ensure_image ENGINE CLI NAME
  local engine="$1" cli="$2" name="$3" want have
  want="$(recipe_hash)"
  have="$($cli image inspect --format '{{ index .Config.Labels "berth.test.recipe" }}' "$name" 2>/dev/null || true)"
  if [ "$have" = "$want" ]; then
    log "$engine: image $name is current (recipe $want)"
    return 0
  fi
  build_rootfs
  log "$engine: importing $name (recipe $want${have:+, replacing $have})"
  $cli import \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'WORKDIR /' \
    --change 'CMD ["/bin/sh"]' \
    --change "LABEL berth.test.recipe=$want" \
    --change "LABEL berth.workdir-owner=1000:1000@/workspace" \
    "$ROOTFS_TAR" "$name" >/dev/null
  have="$($cli image inspect --format '{{ index .Config.Labels "berth.test.recipe" }}' "$name" 2>/dev/null || true)"
  [ "$have" = "$want" ] || die "$engine: image $name was not imported"
}

docker_cli() { # the docker CLI talking to our socket; /usr/bin/docker (docker.io) preferred
  local bin=docker
  [ -x /usr/bin/docker ] && bin=/usr/bin/docker
  command -v "$bin" >/dev/null || apt_install docker.io
  DOCKER_HOST="unix://$DOCKER_SOCKET" "$bin" "$@"
}
podman_cli() { CONTAINER_HOST="unix://$PODMAN_SOCKET" podman --remote "$@"; }

# ---------------------------------------------------------------- main
write_result() { # write_result ENGINE SOCKET IMAGE VERSION
  printf '{"engine":"%s","socketPath":"%s","image":"%s","version":"%s","writtenAt":"%s"}\n' \
    "$1" "$2" "$3" "$4" "$(date -u +%FT%TZ)" >"$OUT_DIR/$1.json.tmp"
  mv "$OUT_DIR/$1.json.tmp" "$OUT_DIR/$1.json"
  log "$1: wrote $OUT_DIR/$1.json"
  cat "$OUT_DIR/$1.json"
}

# The local runtime's sandbox (bubblewrap): installed when we can, else the runtime says it
# runs without isolation.
ensure_bwrap() {
  command -v bwrap >/dev/null && return 0
  if is_root && command -v apt-get >/dev/null; then apt_install bubblewrap
  else log "bwrap is missing (apt-get install bubblewrap): the local runtime runs without isolation"; fi
}
ensure_bwrap

# gVisor (`runsc`) for environments with isolation "gvisor": registered before the engines
# start (or are restarted) so they load it (scripts/gvisor/ensure.sh; BERTH_GVISOR=off skips).
case " $ENGINES " in *" docker "* | *" podman "*) bash "$ROOT/scripts/gvisor/ensure.sh" 9>&- ;; esac

for engine in $ENGINES; do
  case "$engine" in
    docker)
      ensure_docker
      ensure_image docker docker_cli "$IMAGE"
      ver="$(curl -fsS --unix-socket "$DOCKER_SOCKET" http://engine/version | sed -n 's/.*"Version":"\([^"]*\)".*/\1/p' | head -1)"
      write_result docker "$DOCKER_SOCKET" "$IMAGE" "$ver"
      ;;
    podman)
      ensure_podman
      ensure_image podman podman_cli "localhost/$IMAGE"
      write_result podman "$PODMAN_SOCKET" "localhost/$IMAGE" "$(podman --version | awk '{print $3}')"
      ;;
    local) ;; # the local runtime needs only bwrap (ensured above)
    *) die "unknown engine '$engine' (known: docker podman local)" ;;
  esac
done
[ -n "$ROOTFS_TAR" ] && rm -f "$ROOTFS_TAR"
exit 0
