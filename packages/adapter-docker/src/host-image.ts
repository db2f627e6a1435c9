import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  closeSync,
  createReadStream,
  existsSync,
  lstatSync,
  openSync,
  readSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  statSync,
  type Stats,
} from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import type { ImageRecipe } from '@berth/core'
import { WORKDIR_OWNER_LABEL } from './engine-runtime.js'
import { pack, type Header } from 'tar-stream'

type HeaderArgument = Partial<Header> & Pick<Header, 'name'>

/** Bump when what the recipe collects changes, so images built from the old one are rebuilt. */
const RECIPE_VERSION = 2
/** The uid (and gid) of the image's `node` user, Berth's default agent user (`1000:1000`). */
const AGENT_UID = 1000

/** Tools copied from the host when it has no busybox, so `sh`, `sleep` and friends exist. */
const FALLBACK_TOOLS = [
  'sleep',
  'cat',
  'ls',
  'env',
  'mkdir',
  'rm',
  'cp',
  'mv',
  'ln',
  'chmod',
  'touch',
  'uname',
  'id',
  'pwd',
  'echo',
  'printf',
  'head',
  'tail',
  'wc',
  'tr',
  'cut',
  'sort',
  'uniq',
  'grep',
  'sed',
  'find',
  'xargs',
  'date',
  'tar',
  'gzip',
  'sha256sum',
]

type Entry =
  | { kind: 'dir'; mode: number; uid?: number }
  | { kind: 'file'; source: string; mode: number; size: number; mtimeMs: number }
  | { kind: 'symlink'; target: string }
  | { kind: 'text'; content: string; mode: number }

/** Where the host keeps a program, or `null`. */
function which(name: string, path = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'): string | null {
  for (const dir of path.split(delimiter)) {
    const candidate = join(dir, name)
    try {
      if (statSync(candidate).isFile()) return candidate
    } catch {
      // not here
    }
  }
  return null
}

/** The shared libraries `ldd` lists for a binary (the loader included); none for a static one. */
function librariesOf(binary: string): string[] {
  let out: string
  try {
    out = execFileSync('ldd', [binary], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      throw new Error('the host has no `ldd`: cannot tell which libraries node needs')
    return [] // "not a dynamic executable"
  }
  return [...out.matchAll(/(?:^|\s)(\/[^\s()]+)/gm)].map((m) => m[1]!)
}

/** A root filesystem being described: image path (no leading slash) → entry. */
class Tree {
  readonly entries = new Map<string, Entry>()
  readonly libraries = new Set<string>()

  private parents(path: string): void {
    for (let dir = dirname(path); dir !== '.' && dir !== '/' && !this.entries.has(dir); dir = dirname(dir)) {
      this.entries.set(dir, { kind: 'dir', mode: 0o755 })
    }
  }

  dir(path: string, mode = 0o755, uid?: number): void {
    this.parents(path)
    this.entries.set(path, { kind: 'dir', mode, ...(uid !== undefined && { uid }) })
  }

  /** A host file (symlinks followed) at `path`; with `libs`, also the libraries it links. */
  file(path: string, source: string, libs = false): void {
    const real = realpathSync(source)
    const st = statSync(real)
    this.parents(path)
    this.entries.set(path, { kind: 'file', source: real, mode: st.mode & 0o7777, size: st.size, mtimeMs: st.mtimeMs })
    if (libs) for (const lib of librariesOf(real)) this.library(lib)
  }

  /** A library at the path `ldd` named, unless already there. */
  library(path: string): void {
    const key = path.slice(1)
    if (this.entries.has(key)) return
    this.libraries.add(path)
    this.file(key, path)
  }

  symlink(path: string, target: string): void {
    if (this.entries.has(path)) return
    this.parents(path)
    this.entries.set(path, { kind: 'symlink', target })
  }

  text(path: string, content: string, mode = 0o644): void {
    this.parents(path)
    this.entries.set(path, { kind: 'text', content, mode })
  }

  /** Every file and directory under a host directory, at the same place. */
  copyTree(hostDir: string): void {
    for (const name of readdirSync(hostDir)) {
      const source = join(hostDir, name)
      const st = lstatSync(source)
      if (st.isDirectory()) {
        this.dir(source.slice(1), st.mode & 0o7777)
        this.copyTree(source)
      } else if (st.isSymbolicLink()) this.symlink(source.slice(1), readlinkSync(source))
      else if (st.isFile()) this.file(source.slice(1), source)
    }
  }
}

/** Git, its HTTPS transport and the links to them in its exec path, the templates, and their libraries. */
function addGit(tree: Tree, git: string): void {
  const core = execFileSync(git, ['--exec-path'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  // The other helpers there need perl or are servers.
  for (const name of ['git', 'git-remote-http']) {
    if (existsSync(join(core, name))) tree.file(join(core, name).slice(1), join(core, name), true)
  }
  for (const name of readdirSync(core)) {
    const p = join(core, name)
    if (lstatSync(p).isSymbolicLink()) tree.symlink(p.slice(1), readlinkSync(p))
  }
  if (existsSync('/usr/share/git-core/templates')) tree.copyTree('/usr/share/git-core/templates')
  tree.symlink('usr/bin/git', join(core, 'git'))
}

/** True for an ELF file (a program or a library: its own libraries come along). */
function isElf(path: string): boolean {
  const fd = openSync(path, 'r')
  try {
    const head = Buffer.alloc(4)
    return readSync(fd, head, 0, 4, 0) === 4 && head.toString('latin1') === '\x7fELF'
  } finally {
    closeSync(fd)
  }
}

/** The files of Debian packages installed on the host (`dpkg -L`), with the libraries their programs link. */
function addPackages(tree: Tree, packages: readonly string[]): void {
  for (const name of packages) {
    let listing: string
    try {
      listing = execFileSync('dpkg', ['-L', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    } catch {
      throw new Error(`package ${name} is not installed on this host (the image is built from the host's files)`)
    }
    for (const path of listing
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.startsWith('/'))) {
      let st: Stats
      try {
        st = lstatSync(path)
      } catch {
        continue // listed but removed (e.g. a diverted file)
      }
      const key = path.slice(1)
      if (st.isSymbolicLink()) tree.symlink(key, readlinkSync(path))
      else if (st.isFile()) tree.file(key, path, isElf(path))
    }
  }
}

/** What the recipe is built from, and how to hash it. */
function describeHost(packages: readonly string[] = []): { tree: Tree; parts: string[] } {
  const tree = new Tree()
  const parts = [`node ${process.version}`]
  for (const d of ['bin', 'usr/bin', 'usr/local/bin', 'etc', 'root', 'proc', 'sys', 'dev'])
    tree.dir(d, d === 'root' ? 0o700 : 0o755)
  // The agent's (default) user owns its working directory from the start: no chown per container.
  tree.dir('workspace', 0o755, AGENT_UID)
  tree.dir('tmp', 0o1777)
  tree.dir('home/node', 0o755, 1000)
  tree.file('usr/local/bin/node', process.execPath, true)
  // Claude Code's Bash tool needs bash (busybox has none).
  const bash = which('bash')
  if (bash) {
    tree.file('bin/bash', bash, true)
    parts.push('bash')
  }
  const busybox = which('busybox')
  if (busybox) {
    tree.file('bin/busybox', busybox, true)
    const applets = execFileSync(busybox, ['--list'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
    for (const applet of applets
      .split('\n')
      .map((a) => a.trim())
      .filter(Boolean)) {
      if (applet !== 'busybox') tree.symlink(`bin/${applet}`, 'busybox')
    }
    parts.push('busybox')
  } else {
    if (bash) tree.symlink('bin/sh', 'bash')
    for (const tool of FALLBACK_TOOLS) {
      const found = which(tool)
      if (found) tree.file(`bin/${tool}`, found, true)
    }
    parts.push('coreutils')
  }
  // `#!/usr/bin/env …` scripts.
  if (tree.entries.has('bin/env')) tree.symlink('usr/bin/env', '/bin/env')
  // Claude Code's native binary links librt.so.1, which node does not: it sits beside libc.
  const libc = [...tree.libraries].find((l) => /\/libc\.so\.6$/.test(l))
  if (libc && existsSync(join(dirname(libc), 'librt.so.1'))) tree.library(join(dirname(libc), 'librt.so.1'))
  const git = which('git')
  if (git) {
    addGit(tree, git)
    parts.push('git')
  }
  if (existsSync('/etc/ssl/certs/ca-certificates.crt')) {
    tree.file('etc/ssl/certs/ca-certificates.crt', '/etc/ssl/certs/ca-certificates.crt')
    parts.push('CA certificates')
  }
  if (packages.length) {
    addPackages(tree, packages)
    parts.push(`packages ${packages.join(' ')}`)
  }
  tree.text(
    'etc/passwd',
    'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n',
  )
  tree.text('etc/group', 'root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n')
  return { tree, parts }
}

/** The tree as a tar stream, parents before children, file contents read as they are packed. */
function packTree(tree: Tree): AsyncIterable<Uint8Array> {
  const p = pack()
  const put = (header: HeaderArgument, source?: string) =>
    new Promise<void>((resolve, reject) => {
      const sink = p.entry(header, (err) => (err ? reject(err) : resolve()))
      if (source) createReadStream(source).on('error', reject).pipe(sink)
    })
  void (async () => {
    for (const [name, e] of [...tree.entries].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (e.kind === 'dir') await put({ name, type: 'directory', mode: e.mode, uid: e.uid ?? 0, gid: e.uid ?? 0 })
      else if (e.kind === 'symlink') await put({ name, type: 'symlink', linkname: e.target })
      else if (e.kind === 'text') {
        await new Promise<void>((resolve, reject) =>
          p.entry({ name, mode: e.mode }, e.content, (err) => (err ? reject(err) : resolve())),
        )
      } else await put({ name, type: 'file', mode: e.mode, size: e.size, mtime: new Date(e.mtimeMs) }, e.source)
    }
    p.finalize()
  })().catch((err: Error) => p.destroy(err))
  return p as unknown as AsyncIterable<Uint8Array>
}

/**
 * A recipe for a runner image made from this host, for engines that cannot pull one (no
 * registry): the node running Berth (at `/usr/local/bin/node`), bash, busybox and its
 * applets (else the host's core tools), git with its HTTPS transport and templates, the
 * CA bundle, librt (Claude Code's native binary needs it) and every library `ldd` lists
 * for them; `/tmp`, `/workspace`, a `node` user (1000). The agent runner itself is
 * mounted from the install (`BERTH_RUNNER=bundle`), so this is all a task needs.
 * `packages` adds the files of Debian packages installed on the host (`dpkg -L`, e.g.
 * `python3.11-minimal`), with the libraries their programs link (an environment's toolchain).
 * The hash covers the recipe's version, node's version and every file's path, size and
 * modification time: upgrading node (or a library) rebuilds the image. Throws when the
 * host has no `ldd`.
 *
 * @example
 * ```ts
 * const rt = dockerRuntime()
 * await rt.ensureImage!('berth-runner:latest', { recipe: hostImageRecipe() })
 * ```
 */
export function hostImageRecipe(options: { packages?: readonly string[] } = {}): ImageRecipe {
  const { tree, parts } = describeHost(options.packages)
  const manifest = [...tree.entries]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([name, e]) => {
      if (e.kind === 'file') return [name, e.source, e.mode, e.size, Math.round(e.mtimeMs)]
      if (e.kind === 'text') return [name, e.content, e.mode]
      if (e.kind === 'symlink') return [name, '->', e.target]
      return [name, e.mode, e.uid ?? 0]
    })
  const hash = createHash('sha256')
    .update(JSON.stringify([RECIPE_VERSION, process.version, manifest]))
    .digest('hex')
    .slice(0, 16)
  return {
    hash,
    description: `the host's ${parts.join(', ')} (${tree.libraries.size} libraries)`,
    rootfs: () => packTree(tree),
    env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
    cmd: ['/bin/sh'],
    workingDir: '/',
    labels: { [WORKDIR_OWNER_LABEL]: `${AGENT_UID}:${AGENT_UID}@/workspace` },
  }
}
