#!/usr/bin/env node
/**
 * The repository's `postinstall`: make sure `pnpm start`'s default runtime can run here.
 * With no Docker or Podman answering, `pnpm start` runs tasks on the `local` runtime, which
 * needs bubblewrap (`bwrap`) to sandbox them and refuses to start without it. When neither
 * an engine nor bwrap is found:
 *
 * - as root on Debian or Ubuntu, Debian's `bubblewrap` package is installed with apt-get
 *   (each step printed; `apt-get update` first when the package lists do not know it);
 * - otherwise the one command that installs it is printed, and nothing else happens.
 *
 * Silent when an engine answers or bwrap is there. `BERTH_INSTALL_BUBBLEWRAP=false` skips it
 * all. Never fails the install: the worst case is `pnpm start`'s own refusal, later.
 */
import { spawnSync } from 'node:child_process'
import { accessSync, constants, existsSync, readFileSync } from 'node:fs'
import { request } from 'node:http'
import { delimiter, join } from 'node:path'

const env = process.env
const say = (line) => console.log(`berth setup: ${line}`)

function onPath(bin) {
  for (const dir of (env.PATH ?? '/usr/bin:/bin').split(delimiter))
    try {
      accessSync(join(dir, bin), constants.X_OK)
      return true
    } catch {
      // next
    }
  return false
}

/** Whether an Engine API answers `GET /_ping` on this unix socket within 2 s. */
function answers(socketPath) {
  if (!existsSync(socketPath)) return Promise.resolve(false)
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping', timeout: 2000 }, (res) => {
      res.resume()
      resolve(res.statusCode === 200)
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(false))
    req.end()
  })
}

/** The sockets `pnpm start` tries (README "Quick start"); a remote engine named in the environment counts as one. */
async function engineAnswers() {
  const remote = [env.DOCKER_HOST, env.CONTAINER_HOST, env.BERTH_ENGINE_URL].filter(Boolean)
  if (remote.some((url) => !url.startsWith('unix://'))) return true
  const sockets = [
    ...remote.map((url) => url.slice('unix://'.length)),
    '/var/run/docker.sock',
    '/run/podman/podman.sock',
    ...(env.XDG_RUNTIME_DIR ? [join(env.XDG_RUNTIME_DIR, 'podman/podman.sock')] : []),
  ]
  for (const socket of sockets) if (await answers(socket)) return true
  return false
}

/** The command that installs bubblewrap with this system's package manager. */
function installCommand() {
  const sudo = process.getuid?.() === 0 ? '' : 'sudo '
  const managers = [
    ['apt-get', 'apt-get install bubblewrap'],
    ['dnf', 'dnf install bubblewrap'],
    ['yum', 'yum install bubblewrap'],
    ['zypper', 'zypper install bubblewrap'],
    ['pacman', 'pacman -S bubblewrap'],
    ['apk', 'apk add bubblewrap'],
  ]
  const found = managers.find(([bin]) => onPath(bin))
  return found ? `${sudo}${found[1]}` : 'your package manager: install bubblewrap (the `bwrap` command)'
}

function isDebian() {
  if (existsSync('/etc/debian_version')) return true
  const release = existsSync('/etc/os-release') ? readFileSync('/etc/os-release', 'utf8') : ''
  return /^(ID|ID_LIKE)=.*\b(debian|ubuntu)\b/m.test(release)
}

/** Run `apt-get` with its output shown; resolves whether it succeeded. */
function aptGet(args) {
  say(`apt-get ${args.join(' ')}`)
  // Quiet (no progress bars), with dpkg's own lines kept.
  const run = spawnSync('apt-get', ['-q', '-o', 'Dpkg::Use-Pty=0', ...args], {
    stdio: 'inherit',
    env: { ...env, DEBIAN_FRONTEND: 'noninteractive' },
  })
  return run.status === 0
}

async function main() {
  if (process.platform !== 'linux') return
  if (/^(false|0|off|no)$/i.test(env.BERTH_INSTALL_BUBBLEWRAP ?? '')) return
  if (onPath('bwrap') || (await engineAnswers())) return
  const why = 'no container engine answers and bubblewrap is missing: `pnpm start` would refuse to run tasks'
  if (process.getuid?.() !== 0 || !isDebian() || !onPath('apt-get')) {
    say(`${why}. Run: ${installCommand()} (or start Docker or Podman).`)
    return
  }
  say(`${why}; installing Debian's bubblewrap (BERTH_INSTALL_BUBBLEWRAP=false skips this).`)
  const install = ['install', '-y', '--no-install-recommends', 'bubblewrap']
  // A fresh system may have no package lists yet: update them first.
  const known = spawnSync('apt-cache', ['show', 'bubblewrap'], { stdio: 'ignore' }).status === 0
  const done = (known || aptGet(['update'])) && aptGet(install)
  say(done ? 'bubblewrap installed.' : `could not install bubblewrap; run: ${installCommand()}`)
}

await main()
