/**
 * The server image: an OCI image of this standalone server built without any registry, the
 * way runner images are (a root filesystem of this host's Node, bash, busybox, git and the
 * libraries they link, from `hostImageRecipe`). Two tags come out of one Dockerfile, both
 * on that root filesystem: `berth-agent:<version>` (the task image: the runner at
 * /opt/berth-runner) and `berth-server:<version>` (the server built to plain JavaScript with
 * its production dependencies from `pnpm deploy --prod`, its non-root user, /data, PORT and
 * a health check; no runner, no TypeScript). A build whose inputs did not change is skipped.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { hostImageRecipe } from '@berth/adapter-docker'
import { bundleRunner } from '@berth/runner'
import { dockerfile, SERVER_GID, SERVER_UID } from './dockerfile.js'

const EXAMPLE = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const ROOT = resolve(EXAMPLE, '../..')
/** The label holding the hash of everything the image was built from. */
export const RECIPE_LABEL = 'berth.image.recipe'

/** Options of {@link buildServerImage}. */
export interface ServerImageOptions {
  /** The engine's CLI that builds it (default `docker`). */
  engine?: 'docker' | 'podman'
  /** Build even when the images carry the current recipe. */
  force?: boolean
  /** Progress lines (default: none). */
  log?: (line: string) => void
}

/** What {@link buildServerImage} produced. */
export interface ServerImage {
  /** `berth-server:<version>`: the server. */
  server: string
  /** `berth-agent:<version>`: what task containers start from. */
  agent: string
  version: string
  /** The hash of the inputs, in the images' `berth.image.recipe` label. */
  recipe: string
  /** False when both images were already current. */
  built: boolean
}

/** The workspace packages the server depends on, transitively: name → directory. */
function workspacePackages(dir: string, found = new Map<string, string>()): Map<string, string> {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>
  }
  for (const [name, range] of Object.entries(manifest.dependencies ?? {})) {
    if (!range.startsWith('workspace:') || found.has(name)) continue
    const pkg = resolve(dir, 'node_modules', name)
    found.set(name, pkg)
    workspacePackages(pkg, found)
  }
  return found
}

/** Every file under `dir` (sorted, `node_modules` skipped) into `hash`, path and content. */
function hashTree(hash: ReturnType<typeof createHash>, dir: string, base = dir): void {
  if (!existsSync(dir)) return
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (entry.name === 'node_modules') continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) hashTree(hash, path, base)
    else if (entry.isFile()) hash.update(path.slice(base.length)).update(readFileSync(path))
  }
}

/** The hash of what the images are made of: host files, built packages, the server, the lockfile, this recipe. */
function recipeHash(hostHash: string): string {
  const hash = createHash('sha256')
    .update(hostHash)
    .update(readFileSync(join(ROOT, 'pnpm-lock.yaml')))
  for (const dir of [EXAMPLE, ...workspacePackages(EXAMPLE).values()]) {
    hash.update(readFileSync(join(dir, 'package.json')))
    for (const sub of ['dist', 'src', 'image']) hashTree(hash, join(dir, sub))
  }
  return hash.digest('hex').slice(0, 16)
}

/**
 * What `pnpm deploy --prod` brings that the server never runs, under `node_modules/.pnpm`:
 * the Claude Code native binary of the agent SDK (the agent runs in the agent image; the
 * server only imports the runner package's JavaScript), TypeScript (an optional peer of
 * valibot that pnpm installs anyway) and the musl builds of native modules (the root
 * filesystem is this host's glibc).
 */
const UNUSED = [/^@anthropic-ai\+claude-agent-sdk-linux-/, /^typescript@/, /-musl@/]

/** Removes {@link UNUSED} from a deployed app; the bytes freed. */
function pruneUnused(app: string): number {
  const store = join(app, 'node_modules/.pnpm')
  let freed = 0
  for (const name of readdirSync(store)) {
    if (!UNUSED.some((re) => re.test(name))) continue
    freed += treeSize(join(store, name))
    rmSync(join(store, name), { recursive: true, force: true })
  }
  return freed
}

function treeSize(path: string): number {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (!stat?.isDirectory()) return stat?.size ?? 0
  return readdirSync(path).reduce((sum, name) => sum + treeSize(join(path, name)), 0)
}

function run(cli: string, args: string[], cwd = ROOT): string {
  try {
    return execFileSync(cli, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 })
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string }
    throw new Error(`${cli} ${args.join(' ')} failed: ${(e.stderr || e.stdout || e.message).trim().slice(-2000)}`)
  }
}

/** The recipe label of a local image, or `null` when it is missing. */
function labelOf(cli: string, image: string): string | null {
  try {
    const out = execFileSync(
      cli,
      ['image', 'inspect', '--format', `{{ index .Config.Labels "${RECIPE_LABEL}" }}`, image],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    )
    return out.trim()
  } catch {
    return null
  }
}

/**
 * Build `berth-server:<version>` and `berth-agent:<version>` (also tagged `latest`) on the
 * local engine from this install: the workspace packages must be built (`pnpm build`).
 * Nothing is pulled or pushed. Skipped when both images carry the current recipe hash.
 *
 * @example
 * ```ts
 * const { server, agent } = await buildServerImage({ log: console.log })
 * // docker run -v /var/run/docker.sock:/var/run/docker.sock -v berth-data:/data -p 3000:3000 <server>
 * ```
 */
export async function buildServerImage(opts: ServerImageOptions = {}): Promise<ServerImage> {
  const cli = opts.engine ?? 'docker'
  const log = opts.log ?? (() => {})
  const { version } = JSON.parse(readFileSync(join(ROOT, 'packages/server/package.json'), 'utf8')) as {
    version: string
  }
  // First: the server's dist/ (plain JavaScript, the image's entry) is part of the recipe.
  run('pnpm', ['--filter', '@berth/standalone-server', 'build'])
  const host = hostImageRecipe()
  const recipe = recipeHash(host.hash)
  const server = `berth-server:${version}`
  const agent = `berth-agent:${version}`
  if (!opts.force && labelOf(cli, server) === recipe && labelOf(cli, agent) === recipe) {
    log(`${server} and ${agent} are current (recipe ${recipe})`)
    return { server, agent, version, recipe, built: false }
  }
  // Kept between builds: the runner bundle's large native binary is only copied when it changed.
  const context = join(ROOT, '.tmp/image/context')
  mkdirSync(context, { recursive: true })
  log(`root filesystem: ${host.description}`)
  await pipeline(Readable.from(host.rootfs()), createWriteStream(join(context, 'rootfs.tar')))
  log('runner bundle → /opt/berth-runner')
  bundleRunner(join(context, 'runner'))
  log('server and its production dependencies (pnpm deploy --prod)')
  rmSync(join(context, 'app'), { recursive: true, force: true })
  run('pnpm', [
    '--filter',
    '@berth/standalone-server',
    'deploy',
    '--prod',
    '--prefer-offline',
    '--legacy',
    join(context, 'app'),
  ])
  log(`pruned ${(pruneUnused(join(context, 'app')) / 2 ** 20).toFixed(0)} MiB the server never runs`)
  // The server's own user, beside the host recipe's root and node (the agent's 1000).
  mkdirSync(join(context, 'etc'), { recursive: true })
  writeFileSync(
    join(context, 'etc/passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\n' +
      `berth:x:${SERVER_UID}:${SERVER_GID}:berth:/data:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n`,
  )
  writeFileSync(join(context, 'etc/group'), `root:x:0:\nnode:x:1000:\nberth:x:${SERVER_GID}:\nnogroup:x:65534:\n`)
  mkdirSync(join(context, 'data'), { recursive: true })
  writeFileSync(join(context, 'Dockerfile'), dockerfile({ version, recipe, agent }))
  writeFileSync(join(context, '.dockerignore'), '')
  for (const [target, tag] of [
    ['agent', agent],
    ['server', server],
  ] as const) {
    log(`${cli} build --target ${target} -t ${tag}`)
    run(cli, ['build', '--target', target, '-t', tag, '-t', tag.replace(/:[^:]+$/, ':latest'), '.'], context)
  }
  if (labelOf(cli, server) !== recipe) throw new Error(`${server} was built but does not carry recipe ${recipe}`)
  return { server, agent, version, recipe, built: true }
}
