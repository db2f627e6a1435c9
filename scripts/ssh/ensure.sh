#!/usr/bin/env bash
# Make sure `sshd` (Debian's openssh-server) is installed, for the ssh:// engine test.
# Idempotent; installs only when running as root and the binary is missing. Prints the
# binary's path. The test starts its own sshd on a free 127.0.0.1 port with throwaway keys.
set -euo pipefail
if [ ! -x /usr/sbin/sshd ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "sshd is missing; install it: sudo apt-get install -y openssh-server" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends openssh-server >/dev/null 2>&1 || {
    apt-get update >/dev/null && apt-get install -y --no-install-recommends openssh-server >/dev/null
  }
  # The package starts a system service where systemd runs; the test never uses it.
fi
echo /usr/sbin/sshd
