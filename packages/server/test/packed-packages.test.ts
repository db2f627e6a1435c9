/**
 * Berth as its users install it: every public package packed with `pnpm pack`, the tarballs
 * installed with npm into an empty project outside the workspace (no workspace links), and
 * there: publint and attw on every package, `require` and `import` of every entry, a
 * TypeScript file checked against the published types (ESM and CJS), and the README's
 * ten-line embed running the README's first task on the `local` runtime (no engine answers
 * in its environment). The install runs no install script (the dependencies that had one are
 * bundled, see tsup.bundle.ts), and what is bundled works there: dockerode on Docker and Podman,
 * ssh2, bullmq on Redis. Slow (an npm install): one install for the whole file.
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { type AddressInfo, type Socket, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { readEngine, startRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bash, readmeBlock } from './readme.helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone } from './standalone.helpers.js'

const run = promisify(execFile)
const BIN = join(REPO_ROOT, 'node_modules/.bin')

interface Manifest {
  name: string
  private?: boolean
  exports?: Record<string, unknown>
  scripts?: Record<string, string>
}

/** The public packages: name, directory, and the entries their `exports` name. */
const PACKAGES = readdirSync(join(REPO_ROOT, 'packages'))
  .map((dir) => ({ dir: join(REPO_ROOT, 'packages', dir), manifest: readManifest(join(REPO_ROOT, 'packages', dir)) }))
  .filter(({ manifest }) => !manifest.private)
  .map(({ dir, manifest }) => ({
    dir,
    name: manifest.name,
    entries: Object.keys(manifest.exports ?? { '.': {} })
      .filter((key) => key !== './package.json')
      .map((key) => (key === '.' ? manifest.name : `${manifest.name}/${key.slice(2)}`)),
  }))

function readManifest(dir: string): Manifest {
  return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest
}

const root = mkdtempSync(join(tmpdir(), 'berth-packed-'))
const tarballs = join(root, 'tarballs')
const app = join(root, 'app')
let npmOutput = ''

beforeAll(async () => {
  mkdirSync(tarballs)
  mkdirSync(app)
  for (const p of PACKAGES) await run('pnpm', ['pack', '--pack-destination', tarballs], { cwd: p.dir })
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
  const files = readdirSync(tarballs).map((f) => join(tarballs, f))
  const npm = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', ...files], {
    cwd: app,
    maxBuffer: 64 * 1024 * 1024,
  })
  npmOutput = `${npm.stdout}${npm.stderr}`
}, 600_000)

afterAll(() => rmSync(root, { recursive: true, force: true }))

/** Every installed package (nested ones too) for which npm runs something at install time. */
function packagesWithInstallScripts(modules: string): string[] {
  const found: string[] = []
  for (const name of existsSync(modules) ? readdirSync(modules) : []) {
    if (name.startsWith('.')) continue
    const dirs = name.startsWith('@')
      ? readdirSync(join(modules, name)).map((n) => join(modules, name, n))
      : [join(modules, name)]
    for (const dir of dirs) {
      if (!existsSync(join(dir, 'package.json'))) continue
      const { scripts = {} } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest
      if (
        ['preinstall', 'install', 'postinstall'].some((hook) => scripts[hook]) ||
        existsSync(join(dir, 'binding.gyp'))
      )
        found.push(dir.slice(modules.length + 1))
      found.push(...packagesWithInstallScripts(join(dir, 'node_modules')))
    }
  }
  return found
}

/** Run node in the app with `code` (ESM with `module`, else CommonJS); resolves with its stdout. */
async function node(code: string, module: boolean): Promise<string> {
  const args = module ? ['--input-type=module', '-e', code] : ['-e', code]
  return (await run(process.execPath, args, { cwd: app })).stdout
}

describe('installed from tarballs with npm', () => {
  it('the install runs no install script and names none: no tracker, no native build, no error', () => {
    expect(PACKAGES.length).toBeGreaterThanOrEqual(10)
    expect(existsSync(join(app, 'node_modules/@scarf'))).toBe(false)
    expect(npmOutput).not.toMatch(/scarf/i)
    expect(npmOutput).not.toMatch(/npm (error|ERR)/)
    expect(npmOutput).not.toMatch(/install-scripts|install script/i)
    // What npm would run: install hooks, and `node-gyp rebuild` for a package with a binding.gyp.
    expect(packagesWithInstallScripts(join(app, 'node_modules'))).toEqual([])
    for (const name of ['ssh2', 'cpu-features', 'protobufjs', '@grpc', 'msgpackr-extract', 'dockerode', 'bullmq'])
      expect(existsSync(join(app, 'node_modules', name)), name).toBe(false)
    // What is bundled instead carries its licences.
    const notices = (name: string) =>
      readFileSync(join(app, 'node_modules', name, 'dist/THIRD_PARTY_NOTICES.md'), 'utf8')
    expect(notices('@berth/adapter-docker')).toMatch(/## dockerode@[\s\S]*Apache License[\s\S]*## ssh2@[^\n]*MIT/)
    expect(notices('@berth/server')).toMatch(/## bullmq@[\s\S]*## msgpackr@/)
  })

  it('every package passes publint and attw as installed', async () => {
    for (const p of PACKAGES) {
      const dir = join(app, 'node_modules', p.name)
      const lint = await run(join(BIN, 'publint'), ['--pack', 'false', '--strict', dir]).catch((e) => e)
      expect(`${lint.stdout}${lint.stderr}`, p.name).toMatch(/All good|suggestion/i)
      expect(`${lint.stdout}`, p.name).not.toMatch(/Errors:|Warnings:/)
      const tarball = readdirSync(tarballs).find((f) => f.startsWith(`${p.name.slice(1).replace('/', '-')}-`))!
      const types = await run(join(BIN, 'attw'), [join(tarballs, tarball), '--format', 'ascii']).catch((e) => e)
      expect(`${types.stdout}${types.stderr}`, p.name).toContain('No problems found')
    }
  }, 300_000)

  it('every entry loads with require and with import', async () => {
    for (const p of PACKAGES)
      for (const entry of p.entries) {
        const esm = await node(`const m = await import('${entry}'); console.log(Object.keys(m).length)`, true)
        expect(Number(esm), entry).toBeGreaterThan(0)
        const cjs = node(`console.log(Object.keys(require('${entry}')).length)`, false)
        // The testkit's conformance suites are vitest's, and vitest refuses require() itself.
        if (entry === '@berth/testkit')
          await expect(cjs).rejects.toThrow(/Vitest cannot be imported in a CommonJS module/)
        else expect(Number(await cjs), entry).toBeGreaterThan(0)
      }
  }, 120_000)

  it('createBerth works from CommonJS (the WebSocket adapter is found)', async () => {
    const code = `const { createBerth } = require('@berth/server')
      const berth = createBerth({ dataDir: './cjs-data', runtime: false, logger: { info() {}, warn() {}, error() {} } })
      berth.fetch(new Request('http://x/health')).then((r) => console.log(r.status)).then(() => berth.close())`
    expect((await node(code, false)).trim()).toBe('200')
  })

  it('a TypeScript file type-checks against the published types, as ESM and as CJS', async () => {
    const body = `import { createBerth, type BerthOptions } from '@berth/server'
import { createBerthClient } from '@berth/client'
import { createBerthClient as nodeClient } from '@berth/client/node'
import { defaultPoolName } from '@berth/core'
const options: BerthOptions = { dataDir: './.data', runtime: 'local' }
const berth = createBerth(options)
const client = createBerthClient({ baseURL: 'http://127.0.0.1:3000', token: 'k' })
export const used = [berth.fetch, client.tasks.list, nodeClient, defaultPoolName('x').length]
// @ts-expect-error a runtime is a name, a ContainerRuntime or false
createBerth({ runtime: 'kubernetes' })
`
    writeFileSync(join(app, 'check.mts'), body)
    writeFileSync(join(app, 'check.cts'), body)
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc')
    // skipLibCheck: the dependencies' own declarations (unstorage's optional drivers) are not ours to check.
    const args = [
      '--noEmit',
      '--strict',
      '--skipLibCheck',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2022',
    ]
    const types = ['--typeRoots', join(REPO_ROOT, 'node_modules/@types'), '--types', 'node']
    const result = await run(process.execPath, [tsc, ...args, ...types, 'check.mts', 'check.cts'], { cwd: app }).catch(
      (e) => e,
    )
    expect(`${result.stdout}${result.stderr}`).toBe('')
  }, 120_000)

  it("the README's embed runs the README's first task on local", async () => {
    writeFileSync(join(app, 'embed.mjs'), readmeBlock('embed', 'js'))
    const port = await freePort()
    // No engine answers here: createBerth's default falls back to `local`.
    const dead = `unix://${join(root, 'no-engine.sock')}`
    const server = await startStandalone({
      command: [process.execPath, 'embed.mjs'],
      cwd: app,
      port,
      env: bareEnv({ PORT: String(port), BERTH_ADMIN_TOKEN: 'change-me', DOCKER_HOST: dead, CONTAINER_HOST: dead }),
      timeoutMs: 120_000,
    })
    try {
      const result = await bash(readmeBlock('first-task', 'sh'), {
        PATH: process.env.PATH!,
        HOME: app,
        BERTH: server.url,
      })
      expect(result.code, server.output()).toBe(0)
      const task = JSON.parse(result.stdout) as { status: string; result: { tool_calls: { name: string }[] } | null }
      expect(task.status, `${result.stdout}\n--- server ---\n${server.output()}`).toBe('completed')
      expect(task.result?.tool_calls).toContainEqual(expect.objectContaining({ name: 'Bash' }))
      expect(server.output()).toMatch(/container runtime chosen.*local/)
    } finally {
      expect(await server.stop()).toBe(0)
    }
  }, 300_000)
})

describe('in the repository', () => {
  it('pnpm install names no ignored build: each one is built or ignored on purpose', () => {
    // pnpm's rule: a package with an install script that neither list names is "Ignored build scripts".
    const { pnpm } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      pnpm: { onlyBuiltDependencies: string[]; ignoredBuiltDependencies: string[] }
    }
    const store = join(REPO_ROOT, 'node_modules/.pnpm')
    const scripted = new Set(
      readdirSync(store)
        .filter((dir) => dir !== 'node_modules')
        .flatMap((dir) => packagesWithInstallScripts(join(store, dir, 'node_modules'))),
    )
    expect(scripted.size).toBeGreaterThan(0)
    const listed = [...pnpm.onlyBuiltDependencies, ...pnpm.ignoredBuiltDependencies]
    expect([...scripted].filter((name) => !listed.includes(name))).toEqual([])
    // The only build the repository runs: esbuild checks its platform binary.
    expect(pnpm.onlyBuiltDependencies).toEqual(['esbuild'])
  })
})

describe('what the packages bundle works as installed', () => {
  it('the bundled dockerode reaches Docker, and Podman through adapter-podman, over their sockets', async () => {
    const docker = readEngine('docker').socketPath
    const podman = readEngine('podman').socketPath
    const code = `import { connectEngine } from '@berth/adapter-docker'
      import { discoverPodman } from '@berth/adapter-podman'
      const a = await connectEngine({ socketPath: ${JSON.stringify(docker)} }).docker.version()
      const endpoint = discoverPodman({ env: { CONTAINER_HOST: ${JSON.stringify(`unix://${podman}`)} } })
      const b = await connectEngine(endpoint.connection).docker.version()
      console.log(JSON.stringify({ docker: a.Version, podman: b.Components.map((c) => c.Name) }))`
    const out = JSON.parse(await node(code, true)) as { docker: string; podman: string[] }
    expect(out.docker).toMatch(/^\d+\./)
    expect(out.podman.join()).toMatch(/Podman/)
  })

  it('the bundled ssh2 speaks SSH to an ssh:// engine', async () => {
    // A listener that records what the client sends first, then hangs up: an SSH client opens with its banner.
    const server = createServer()
    const banner = new Promise<string>((resolve) => {
      server.once('connection', (socket: Socket) =>
        socket.once('data', (d) => {
          resolve(String(d))
          socket.destroy()
        }),
      )
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    try {
      const code = `import { connectEngine } from '@berth/adapter-docker'
        const { docker } = connectEngine({ host: '127.0.0.1', port: ${port}, protocol: 'ssh', username: 'berth' })
        await docker.ping().catch((e) => console.log(e.message))`
      const [sent] = await Promise.all([banner, node(code, true)])
      expect(sent).toMatch(/^SSH-2\.0-/)
    } finally {
      server.close()
    }
  })

  it('the bundled bullmq runs the Redis coordination queue (msgpackr in JavaScript)', async () => {
    const redis = await startRedis()
    try {
      const code = `import { createCoordination } from '@berth/server'
        const c = await createCoordination({ driver: 'redis', url: ${JSON.stringify(redis.path)}, prefix: 'packed:' })
        await c.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: { n: 1 } })
        const job = await c.queue('tasks').take()
        console.log(JSON.stringify({ id: job.id, payload: job.payload }))
        await c.close()`
      expect(JSON.parse(await node(code, true))).toEqual({ id: 'task_1', payload: { n: 1 } })
    } finally {
      await redis.stop()
    }
  }, 60_000)
})
