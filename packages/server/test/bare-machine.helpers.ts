/**
 * A fresh Debian machine for the README's set-up, made on this host: a root filesystem
 * built with mmdebstrap from Debian's packages (minbase, plus curl: no engine, no
 * bubblewrap), this host's Node 20 and npm copied in (Debian 12's own nodejs is 18), and
 * the repository's files as a clone has them. It runs in a bubblewrap sandbox of the test's
 * own (its own mount and PID namespaces, this host's network, `/dev` and `/sys`), as root.
 * The root filesystem is cached under `~/.cache/berth/rootfs-<hash>.tar`, and the npm cache
 * and pnpm store (downloaded tarballs only) under `~/.cache/berth/bare-machine/`.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { REPO_ROOT } from './standalone.helpers.js'

/** Bumped when the recipe below changes, so the cached root filesystem is built again. */
const RECIPE = 1
const INCLUDE = ['curl', 'ca-certificates']
const CACHE = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'berth')

function run(cmd: string, args: string[], opts: { cwd?: string; input?: string } = {}): string {
  const r = spawnSync(cmd, args, { cwd: opts.cwd, input: opts.input, encoding: 'utf8', maxBuffer: 64 * 1024 ** 2 })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stderr || r.error}`)
  return r.stdout
}

/** Install a Debian package on this host when its command is missing (as the engine suites do). */
function ensureTool(bin: string, pkg: string): void {
  if (spawnSync('sh', ['-c', `command -v ${bin}`]).status === 0) return
  if (process.getuid?.() !== 0 || !existsSync('/etc/debian_version'))
    throw new Error(`the bare-machine test needs ${bin}: apt-get install ${pkg}`)
  const install = () => spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', pkg]).status === 0
  // A machine whose package lists are empty or old: update them once.
  if (!install()) {
    run('apt-get', ['update', '-q'])
    run('apt-get', ['install', '-y', '-q', '--no-install-recommends', pkg])
  }
}

/** This host's Debian release and the mirror its apt sources name for it (`/etc/apt/sources.list*`). */
export function debianMirror(): { suite: string; mirror: string } {
  const release = readFileSync('/etc/os-release', 'utf8')
  const suite = /^VERSION_CODENAME=(\S+)/m.exec(release)?.[1]
  if (!suite) throw new Error('the bare-machine test needs a Debian host (no VERSION_CODENAME in /etc/os-release)')
  const dir = '/etc/apt/sources.list.d'
  const files = ['/etc/apt/sources.list', ...(existsSync(dir) ? readdirSync(dir).map((f) => join(dir, f)) : [])].filter(
    existsSync,
  )
  for (const file of files) {
    const text = readFileSync(file, 'utf8')
    // One-line form: `deb [options] URI SUITE COMPONENTS…`.
    for (const m of text.matchAll(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s/gm))
      if (m[2] === suite) return { suite, mirror: m[1]! }
    // deb822 form: stanzas with `URIs:` and `Suites:`.
    for (const stanza of text.split(/\n\s*\n/)) {
      const uri = /^URIs:\s*(\S+)/im.exec(stanza)?.[1]
      const suites = /^Suites:\s*(.+)$/im.exec(stanza)?.[1]?.split(/\s+/) ?? []
      if (uri && suites.includes(suite) && /^Types:.*\bdeb\b/im.test(stanza)) return { suite, mirror: uri }
    }
  }
  throw new Error(`no apt source on this host names ${suite}`)
}

/** The cached root filesystem tar, built with mmdebstrap when missing. */
function rootfsTar(): string {
  ensureTool('mmdebstrap', 'mmdebstrap')
  const { suite, mirror } = debianMirror()
  const hash = createHash('sha256')
    .update(JSON.stringify([RECIPE, suite, mirror, INCLUDE]))
    .digest('hex')
    .slice(0, 16)
  const tar = join(CACHE, `rootfs-${hash}.tar`)
  if (existsSync(tar)) return tar
  mkdirSync(CACHE, { recursive: true })
  // mmdebstrap writes the format its output's extension names: a tar.
  const partial = join(CACHE, `rootfs-${hash}.partial-${process.pid}.tar`)
  run('mmdebstrap', ['--quiet', '--variant=minbase', `--include=${INCLUDE.join(',')}`, suite, partial, mirror])
  renameSync(partial, tar)
  return tar
}

/** A fresh machine under `dir`: the root filesystem, Node 20 and npm, and the repository at `/root/berth`. */
export function freshMachine(dir: string): { root: string } {
  ensureTool('bwrap', 'bubblewrap')
  const root = join(dir, 'root')
  mkdirSync(root, { recursive: true })
  run('tar', ['-xf', rootfsTar(), '-C', root])
  // This host's Node and the npm it ships with, where a Node 20 install (nodesource's, a tarball's) puts them.
  const npm = join(dirname(dirname(process.execPath)), 'lib/node_modules/npm')
  if (!existsSync(npm)) throw new Error(`npm is not beside this node (${npm})`)
  mkdirSync(join(root, 'usr/local/lib/node_modules'), { recursive: true })
  run('cp', [process.execPath, join(root, 'usr/local/bin/node')])
  run('cp', ['-a', npm, join(root, 'usr/local/lib/node_modules/npm')])
  for (const bin of ['npm', 'npx'])
    run('ln', ['-s', `../lib/node_modules/npm/bin/${bin}-cli.js`, join(root, 'usr/local/bin', bin)])
  // The files a clone of this tree has: tracked and new, not ignored (no node_modules, no dist).
  const files = run('git', ['ls-files', '-z', '-co', '--exclude-standard'], { cwd: REPO_ROOT })
    .split('\0')
    .filter((f) => f && existsSync(join(REPO_ROOT, f)))
  const list = join(dir, 'files')
  writeFileSync(list, `${files.join('\0')}\0`)
  const repo = join(root, 'root/berth')
  mkdirSync(repo, { recursive: true })
  run('sh', ['-c', `tar --null -cf - -C "$1" -T "$2" | tar -xf - -C "$3"`, 'sh', REPO_ROOT, list, repo])
  for (const d of ['root/.npm', 'root/.local/share/pnpm/store']) mkdirSync(join(root, d), { recursive: true })
  return { root }
}

/**
 * The command that runs `script` with bash (`-e -o pipefail`) as root in the machine at
 * `root`, in `cwd` there, with only `env` (and PATH, HOME) set. This host's network is
 * shared; so is the trust its clients have (`NODE_EXTRA_CA_CERTS`, proxy variables), which
 * the machine's Node needs to reach the npm registry from here.
 */
export function inMachine(root: string, script: string, env: Record<string, string> = {}, cwd = '/'): string[] {
  const caches = join(CACHE, 'bare-machine')
  for (const d of ['npm', 'pnpm-store']) mkdirSync(join(caches, d), { recursive: true })
  const passed: Record<string, string> = {
    PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: '/root',
    ...Object.fromEntries(
      ['http_proxy', 'https_proxy', 'no_proxy', 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY']
        .filter((k) => process.env[k])
        .map((k) => [k, process.env[k]!]),
    ),
    ...(process.env.NODE_EXTRA_CA_CERTS && { NODE_EXTRA_CA_CERTS: '/run/host-ca.crt' }),
    ...env,
  }
  return [
    'bwrap',
    ...['--bind', root, '/', '--dev-bind', '/dev', '/dev', '--proc', '/proc', '--bind', '/sys', '/sys'],
    ...['--ro-bind', '/etc/resolv.conf', '/etc/resolv.conf'],
    ...(process.env.NODE_EXTRA_CA_CERTS ? ['--ro-bind', process.env.NODE_EXTRA_CA_CERTS, '/run/host-ca.crt'] : []),
    ...[
      '--bind',
      join(caches, 'npm'),
      '/root/.npm',
      '--bind',
      join(caches, 'pnpm-store'),
      '/root/.local/share/pnpm/store',
    ],
    // Root with every capability, as on a machine of its own; its processes die with the sandbox.
    ...['--unshare-pid', '--cap-add', 'ALL', '--die-with-parent', '--clearenv', '--chdir', cwd],
    ...Object.entries(passed).flatMap(([k, v]) => ['--setenv', k, v]),
    ...['bash', '-e', '-o', 'pipefail', '-c', script],
  ]
}

/** Run a command to its end; resolves its exit code, stdout, and all its output (stdout and stderr interleaved). */
export function runToEnd(command: string[]): Promise<{ code: number | null; stdout: string; output: string }> {
  return new Promise((resolve) => {
    const [file, ...args] = command as [string, ...string[]]
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let output = ''
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString()
      output += d.toString()
    })
    child.stderr.on('data', (d: Buffer) => (output += d.toString()))
    child.on('close', (code) => resolve({ code, stdout, output }))
  })
}

/** Remove a machine made by {@link freshMachine} (nothing is mounted there once its sandboxes ended). */
export function removeMachine(dir: string): void {
  // rm(1): several times faster than Node's rmSync on a tree of node_modules.
  spawnSync('rm', ['-rf', '--one-file-system', dir])
}
