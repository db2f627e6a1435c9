import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  IDLE_COMMAND,
  collectExec,
  isContainerError,
  type ContainerRuntime,
  type ContainerSpec,
  type ExecProcess,
  type RuntimeCapabilities,
} from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { busyboxRecipe } from './image-recipe.js'
import { packTar, readTar } from './tar.js'

/** What the suite needs to know about one adapter beyond the runtime itself. */
export interface ConformanceOptions {
  /**
   * An image with `sh`, `cat`, `wc`, `cut`, `ls`, `touch`, `sleep`, `tr`, `grep`, `kill`,
   * `sha256sum` (the test image). Commands in the suite use paths relative to the working
   * directory `/workspace`, so runtimes without a filesystem namespace (`local`) pass too.
   */
  image: string
  /**
   * What the adapter must guarantee (Docker and Podman: `{ isolation: true, limits: true }`).
   * The suite checks the runtime declares exactly this, and holds it to it: a runtime cannot
   * skip the isolation or limit cases by declaring less.
   */
  capabilities: RuntimeCapabilities
  /** A runtime of the same adapter pointed at an engine that is not there (e.g. a missing socket). */
  makeUnreachable: () => ContainerRuntime | Promise<ContainerRuntime>
  /** Kill the container from outside the runtime (a raw engine client, a signal to its main process). */
  killFromOutside: (id: string) => Promise<void>
  /** Upper bound for "promptly" when a container dies mid-exec (default 10 s). */
  deathDetectionMs?: number
  /**
   * For runtimes with images: the suite then checks `ensureImage` (reuse, build from a
   * recipe with one build for concurrent callers, rebuild on a new recipe, a clear
   * failure) with a tiny recipe made of the host's static busybox, under names on a
   * local port where no registry listens. `removeImage` cleans up from outside.
   */
  images?: { removeImage: (ref: string) => Promise<void> }
}

/** A local TCP port nothing listens on (taken, then released). */
async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

const MiB = 1024 * 1024

async function expectContainerFailure(p: Promise<unknown>, reason?: string): Promise<Record<string, unknown>> {
  const err = await p.then(
    () => {
      throw new Error('expected CONTAINER_FAILED, but the operation succeeded')
    },
    (e: unknown) => e,
  )
  if (!isContainerError(err)) throw err
  expect(err.status).toBe(502)
  if (reason) expect(err.details?.reason).toBe(reason)
  return err.details ?? {}
}

function text(chunks: Uint8Array[]): string {
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * The runtime conformance suite: the same cases against every {@link ContainerRuntime}
 * adapter, like unstorage's driver suite. Call it from an adapter package's test file;
 * it registers a vitest `describe` block with real containers (created under a unique
 * `berth.test.run` label and removed afterwards).
 *
 * Covered: the declared capabilities; labelled volumes; create/start/inspect; exec with streamed stdout+stderr, exit codes 0 and
 * non-zero, callbacks, stdin (string, web stream, async iterable, binary); env and working
 * directory; put/get archive round trip with binary content and nested paths; missing
 * paths; list by label; limits (inspect and the cgroup, where the runtime enforces them);
 * stats; stop; idempotent remove; abort via AbortSignal; engine down → CONTAINER_FAILED;
 * a container killed from outside mid-exec → CONTAINER_FAILED, promptly.
 *
 * @example
 * ```ts
 * runtimeConformanceSuite('docker', () => dockerRuntime({ socketPath }), {
 *   image: 'berth-test:latest',
 *   capabilities: { isolation: true, limits: true },
 *   makeUnreachable: () => dockerRuntime({ socketPath: '/nonexistent.sock' }),
 *   killFromOutside: (id) => new Docker({ socketPath }).getContainer(id).kill(),
 * })
 * ```
 */
export function runtimeConformanceSuite(
  name: string,
  makeRuntime: () => ContainerRuntime | Promise<ContainerRuntime>,
  opts: ConformanceOptions,
): void {
  describe(`ContainerRuntime conformance: ${name}`, () => {
    const run = randomBytes(4).toString('hex')
    const runLabels = { 'berth.test.run': run }
    let rt: ContainerRuntime
    let shared: string // one running container the exec cases share

    const make = async (spec: Partial<ContainerSpec> = {}, start = true): Promise<string> => {
      const { id } = await rt.create({
        image: opts.image,
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        ...spec,
        labels: { ...runLabels, ...spec.labels },
      })
      if (start) await rt.start(id)
      return id
    }
    const sh = async (id: string, script: string, extra: Partial<Parameters<ContainerRuntime['exec']>[1]> = {}) =>
      collectExec(await rt.exec(id, { cmd: ['sh', '-c', script], ...extra }))

    beforeAll(async () => {
      rt = await makeRuntime()
      await rt.ping()
      shared = await make({ env: { BERTH_SUITE: name } })
    })

    const builtImages: string[] = []

    afterAll(async () => {
      if (!rt) return
      const mine = await rt.list({ labels: runLabels }).catch(() => [])
      await Promise.all(mine.map((c) => rt.remove(c.id)))
      for (const ref of builtImages) await opts.images?.removeImage(ref).catch(() => {})
      await rt.close?.()
    })

    it('declares the capabilities the adapter must have', () => {
      expect({ ...rt.capabilities }).toEqual(opts.capabilities)
    })

    it('creates labelled volumes, lists them by label, mounts them writable and removes them idempotently', async () => {
      const volume = `berth-conformance-${run}`
      await rt.createVolume(volume, { labels: { ...runLabels, 'berth.workspace': 'ws_conformance' } })
      await rt.createVolume(volume, { labels: { ...runLabels, 'berth.workspace': 'ws_other' } }) // exists: unchanged
      try {
        const listed = await rt.listVolumes({ labels: runLabels })
        expect(listed.map((v) => v.name)).toEqual([volume])
        expect(listed[0]!.labels).toMatchObject({ 'berth.managed': 'true', 'berth.workspace': 'ws_conformance', ...runLabels })
        expect(await rt.listVolumes({ labels: { 'berth.test.run': `${run}-none` } })).toEqual([])
        const a = await make({ mounts: [{ type: 'volume', source: volume, target: '/workspace/vol' }] })
        expect((await sh(a, 'echo kept > vol/file && echo ok')).stdout.trim()).toBe('ok')
        await rt.remove(a)
        const b = await make({ mounts: [{ type: 'volume', source: volume, target: '/workspace/vol' }] })
        expect((await sh(b, 'cat vol/file')).stdout.trim()).toBe('kept')
        await rt.remove(b)
      } finally {
        await rt.removeVolume(volume)
      }
      expect(await rt.listVolumes({ labels: runLabels })).toEqual([])
      await rt.removeVolume(volume)
    })

    it('creates and starts a container; inspect reports it running with berth labels', async () => {
      const info = await rt.inspect(shared)
      expect(info.id).toBe(shared)
      expect(info.state).toBe('running')
      expect(info.running).toBe(true)
      expect(info.exitCode).toBeNull()
      expect(info.labels).toMatchObject({ 'berth.managed': 'true', 'berth.test.run': run })
      expect(Date.parse(info.createdAt)).toBeGreaterThan(Date.now() - 10 * 60_000)
      expect(info.startedAt).not.toBeNull()
    })

    it('exec streams stdout and stderr separately, as they are written, with exit code 0', async () => {
      const proc = await rt.exec(shared, {
        cmd: ['sh', '-c', 'echo first; echo oops >&2; sleep 1; echo second'],
      })
      const started = Date.now()
      let firstAt = 0
      const out: Uint8Array[] = []
      const err: Uint8Array[] = []
      await Promise.all([
        (async () => {
          for await (const c of proc.stdout) {
            if (!firstAt) firstAt = Date.now()
            out.push(c)
          }
        })(),
        (async () => {
          for await (const c of proc.stderr) err.push(c)
        })(),
      ])
      const result = await proc.exit
      const ended = Date.now()
      expect(result).toEqual({ exitCode: 0, killed: false })
      expect(text(out)).toBe('first\nsecond\n')
      expect(text(err)).toBe('oops\n')
      // The first line arrived while the command was still sleeping: streamed, not buffered.
      expect(ended - firstAt).toBeGreaterThan(600)
      expect(firstAt - started).toBeLessThan(900)
    })

    it('exec reports a non-zero exit code and its output', async () => {
      const r = await sh(shared, 'echo partial; echo bad >&2; exit 7')
      expect(r.exitCode).toBe(7)
      expect(r.killed).toBe(false)
      expect(r.stdout).toBe('partial\n')
      expect(r.stderr).toBe('bad\n')
    })

    it('exec delivers output to callbacks when given', async () => {
      const out: Uint8Array[] = []
      const err: Uint8Array[] = []
      const proc = await rt.exec(shared, {
        cmd: ['sh', '-c', 'printf abc; printf xyz >&2'],
        onStdout: (c) => out.push(c),
        onStderr: (c) => err.push(c),
      })
      const r = await collectExec(proc)
      expect(r.exitCode).toBe(0)
      expect(text(out)).toBe('abc')
      expect(text(err)).toBe('xyz')
      expect(r.stdout).toBe('') // went to the callback instead
    })

    it('exec pipes stdin from a string, a web stream and an async iterable, binary-safe', async () => {
      const fromString = await sh(shared, 'cat', { stdin: 'hello\nworld\n' })
      expect(fromString.stdout).toBe('hello\nworld\n')

      const enc = new TextEncoder()
      const web = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(enc.encode('one '))
          c.enqueue(enc.encode('two'))
          c.close()
        },
      })
      expect((await sh(shared, 'cat', { stdin: web })).stdout).toBe('one two')

      const bytes = new Uint8Array(256 * 64)
      for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256
      async function* gen() {
        for (let i = 0; i < bytes.length; i += 1000) yield bytes.subarray(i, i + 1000)
      }
      const proc = await rt.exec(shared, { cmd: ['cat'], stdin: gen() })
      const chunks: Uint8Array[] = []
      for await (const c of proc.stdout) chunks.push(c)
      expect((await proc.exit).exitCode).toBe(0)
      expect(Buffer.concat(chunks).equals(Buffer.from(bytes))).toBe(true)

      // Without stdin the command sees end-of-input at once instead of waiting.
      const none = await sh(shared, 'wc -c')
      expect(none.stdout.trim()).toBe('0')
    })

    it('applies the container env and working directory, and per-exec env and cwd', async () => {
      const id = await make({ env: { FROM_SPEC: 'spec-value' }, workingDir: '/workspace/sub' })
      const r = await sh(id, 'echo "$FROM_SPEC|$FROM_EXEC"; pwd; echo marker > here.txt', {
        env: { FROM_EXEC: 'exec-value' },
      })
      expect(r.exitCode).toBe(0)
      const [vars, cwd] = r.stdout.split('\n')
      expect(vars).toBe('spec-value|exec-value')
      expect(cwd?.endsWith('/workspace/sub')).toBe(true)
      // The relative write landed in the working directory, seen through the archive API.
      const [entry] = await readTar(await rt.getArchive(id, '/workspace/sub/here.txt'))
      expect(entry?.content.toString()).toBe('marker\n')
      // cwd overrides the working directory for one exec.
      const other = await sh(id, 'pwd', { cwd: '/workspace' })
      expect(other.stdout.trim().endsWith('/workspace')).toBe(true)
      expect(other.stdout.trim().endsWith('/sub')).toBe(false)
    })

    it('round-trips a tar with binary content and nested paths', async () => {
      const binary = randomBytes(200 * 1024)
      const tar = await packTar([
        { name: 'tree/', type: 'directory' },
        { name: 'tree/deeper/', type: 'directory' },
        { name: 'tree/deeper/blob.bin', content: binary },
        { name: 'tree/readme.txt', content: 'hello tar\n' },
      ])
      await rt.putArchive(shared, '/workspace', tar)

      // Visible to commands, byte for byte.
      const sum = await sh(shared, 'sha256sum tree/deeper/blob.bin | cut -d" " -f1')
      const { createHash } = await import('node:crypto')
      expect(sum.stdout.trim()).toBe(createHash('sha256').update(binary).digest('hex'))

      // A directory comes back with itself as the top entry, directories named `dir/`.
      const entries = await readTar(await rt.getArchive(shared, '/workspace/tree'))
      const byName = new Map(entries.map((e) => [e.name, e]))
      expect([...byName.keys()].sort()).toEqual(
        ['tree/', 'tree/deeper/', 'tree/deeper/blob.bin', 'tree/readme.txt'].sort(),
      )
      expect(byName.get('tree/')?.type).toBe('directory')
      expect(byName.get('tree/deeper/blob.bin')?.content.equals(binary)).toBe(true)
      expect(byName.get('tree/readme.txt')?.content.toString()).toBe('hello tar\n')

      // A file comes back as a single entry named by its base name; a web stream body works too.
      const single = await readTar(await rt.getArchive(shared, '/workspace/tree/deeper/blob.bin'))
      expect(single.map((e) => e.name)).toEqual(['blob.bin'])
      expect(single[0]?.content.equals(binary)).toBe(true)

      const again = await packTar([{ name: 'streamed.txt', content: 'via stream' }])
      await rt.putArchive(
        shared,
        '/workspace/tree',
        new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(again.subarray(0, 700))
            c.enqueue(again.subarray(700))
            c.close()
          },
        }),
      )
      expect((await sh(shared, 'cat tree/streamed.txt')).stdout).toBe('via stream')
    })

    it('reports a missing archive path as CONTAINER_FAILED not_found', async () => {
      await expectContainerFailure(rt.getArchive(shared, '/workspace/does-not-exist'), 'not_found')
      const tar = await packTar([{ name: 'x.txt', content: 'x' }])
      await expectContainerFailure(rt.putArchive(shared, '/no/such/dir', tar), 'not_found')
    })

    it('lists its containers by label', async () => {
      const a = await make({ labels: { 'berth.pool': `a-${run}`, 'berth.owner': 'usr_a' } }, false)
      const b = await make({ labels: { 'berth.pool': `b-${run}`, 'berth.owner': 'usr_b' } }, false)
      const onlyA = await rt.list({ labels: { 'berth.pool': `a-${run}` } })
      expect(onlyA.map((c) => c.id)).toEqual([a])
      expect(onlyA[0]?.labels).toMatchObject({ 'berth.managed': 'true', 'berth.owner': 'usr_a' })
      expect(onlyA[0]?.state).toBe('created')
      const both = await rt.list({ labels: { ...runLabels, 'berth.owner': true } })
      expect(both.map((c) => c.id).sort()).toEqual([a, b].sort())
      const all = await rt.list({ labels: runLabels })
      expect(all.map((c) => c.id)).toEqual(expect.arrayContaining([shared, a, b]))
      const running = await rt.list({ labels: runLabels, all: false })
      expect(running.map((c) => c.id)).toContain(shared)
      expect(running.map((c) => c.id)).not.toContain(a)
    })

    it('applies resource limits where the runtime enforces them, and says so', async () => {
      const limits = { memoryBytes: 256 * MiB, pids: 64, cpus: 0.5 }
      const id = await make({ limits })
      const info = await rt.inspect(id)
      if (!opts.capabilities.limits) {
        // An honest runtime without enforcement reports none rather than pretending.
        expect(info.limits).toEqual({})
        return
      }
      expect(info.limits).toEqual(limits)
      const mem = await sh(
        id,
        'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
      )
      expect(Number(mem.stdout.trim())).toBe(256 * MiB)
      const pids = await sh(id, 'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max')
      expect(Number(pids.stdout.trim())).toBe(64)
    })

    it('mounts host directories, read-only where asked (enforced when the runtime isolates)', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'berth-conformance-'))
      writeFileSync(join(dir, 'ro.txt'), 'from host\n')
      const rw = mkdtempSync(join(tmpdir(), 'berth-conformance-rw-'))
      try {
        const id = await make({
          mounts: [
            { type: 'bind', source: dir, target: '/workspace/ro', readOnly: true },
            { type: 'bind', source: rw, target: '/workspace/rw' },
          ],
        })
        const r = await sh(id, 'cat ro/ro.txt; echo written > rw/out.txt && echo rw-ok; touch ro/new 2>/dev/null && echo ro-writable')
        expect(r.stdout).toContain('from host')
        expect(r.stdout).toContain('rw-ok')
        expect(readFileSync(join(rw, 'out.txt'), 'utf8')).toBe('written\n')
        if (opts.capabilities.isolation) expect(r.stdout).not.toContain('ro-writable')
      } finally {
        rmSync(dir, { recursive: true, force: true })
        rmSync(rw, { recursive: true, force: true })
      }
    })

    it('isolates where it says it does: no new privileges, capabilities bounded, an init as PID 1', async () => {
      const r = await sh(shared, 'grep -E "^(CapBnd|NoNewPrivs)" /proc/self/status; cat /proc/1/comm')
      if (!opts.capabilities.isolation) {
        // The host's own PID 1 is not ours: nothing here is isolated, and the runtime says so.
        expect(rt.capabilities.limits).toBe(false)
        return
      }
      const field = (k: string) => new RegExp(`${k}:\\s+(\\S+)`).exec(r.stdout)?.[1]
      expect(field('NoNewPrivs')).toBe('1')
      const bounding = BigInt(`0x${field('CapBnd')}`)
      for (const [cap, bit] of Object.entries({ SYS_ADMIN: 21, NET_ADMIN: 12, NET_RAW: 13, MKNOD: 27, SYS_PTRACE: 19, SYS_MODULE: 16 })) {
        expect({ cap, kept: (bounding >> BigInt(bit)) & 1n }).toEqual({ cap, kept: 0n })
      }
      expect(r.stdout.trim().split('\n').at(-1)).not.toBe('sleep')
    })

    it('runs commands as a non-root user where it says it can: no capabilities, its working directory and put files its own', async () => {
      if (!rt.capabilities.unprivilegedUser) return
      const id = await make({ user: '1000:1000' })
      const r = await sh(id, 'id -u; grep CapEff /proc/self/status; touch /workspace/mine && echo writable')
      expect(r.stdout).toMatch(/^1000\n/)
      expect(r.stdout).toMatch(/CapEff:\s+0+\n/)
      expect(r.stdout).toContain('writable')
      await rt.putArchive(id, '/workspace', await packTar([{ name: 'put.txt', content: 'x\n' }]))
      expect((await sh(id, 'stat -c %u /workspace/put.txt && echo more >> /workspace/put.txt && echo appended')).stdout).toMatch(/^1000\nappended/)
    })

    it('enforces the egress policies it names, and refuses the others', async () => {
      const enforced = rt.capabilities.egress ?? []
      for (const policy of ['none', 'public', 'allowlist'] as const) {
        if (enforced.includes(policy)) continue
        await expectContainerFailure(make({ egress: { policy } }), 'engine_error')
      }
      if (!enforced.includes('none')) return
      const id = await make({ egress: { policy: 'none' } })
      // Interfaces of the command's network namespace, loopback excepted.
      const r = await sh(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -v '^lo$' | wc -l")
      expect(r.stdout.trim()).toBe('0')
    })

    it('reports memory usage in stats', async () => {
      const stats = await rt.stats(shared)
      expect(stats.memoryBytes).toBeGreaterThan(0)
      expect(stats.memoryBytes).toBeLessThan(2 * 1024 * MiB)
    })

    it('stops a container promptly (SIGTERM reaches the idle process) and inspect shows it exited', async () => {
      const id = await make()
      const t0 = Date.now()
      await rt.stop(id, { timeoutSeconds: 8 })
      expect(Date.now() - t0).toBeLessThan(6000)
      const info = await rt.inspect(id)
      expect(info.state).toBe('exited')
      expect(info.running).toBe(false)
      expect(typeof info.exitCode).toBe('number')
      await rt.stop(id) // stopping a stopped container resolves
      await expectContainerFailure(sh(id, 'true'))
    })

    it('removes idempotently; an absent container is CONTAINER_FAILED not_found', async () => {
      const id = await make()
      await rt.remove(id)
      await rt.remove(id)
      await rt.remove(`nonexistent-${run}`)
      await expectContainerFailure(rt.inspect(id), 'not_found')
      expect((await rt.list({ labels: runLabels })).map((c) => c.id)).not.toContain(id)
    })

    it('kills a command and its children through an AbortSignal', async () => {
      const ac = new AbortController()
      const proc = await rt.exec(shared, {
        cmd: ['sh', '-c', 'echo go; (sleep 2; touch too-late-child) & sleep 2; touch too-late'],
        signal: ac.signal,
      })
      for await (const c of proc.stdout) {
        if (text([c]).includes('go')) break
      }
      const t0 = Date.now()
      ac.abort()
      const result = await proc.exit
      expect(result.killed).toBe(true)
      expect(Date.now() - t0).toBeLessThan(3000)
      await new Promise((r) => setTimeout(r, 2500))
      const ls = await sh(shared, 'ls')
      expect(ls.stdout).not.toContain('too-late')
    })

    it('kill() ends a command that ignores SIGTERM', async () => {
      const proc = await rt.exec(shared, { cmd: ['sh', '-c', "trap '' TERM; echo ready; sleep 30"] })
      for await (const c of proc.stdout) if (text([c]).includes('ready')) break
      const t0 = Date.now()
      await proc.kill()
      expect((await proc.exit).killed).toBe(true)
      expect(Date.now() - t0).toBeLessThan(6000)
    })

    if (opts.images) {
      describe('images', () => {
        let registry: string // host:port of a "registry" that refuses every connection

        beforeAll(async () => {
          expect(rt.ensureImage, `${name} says it has images, but has no ensureImage`).toBeTypeOf('function')
          registry = `127.0.0.1:${await closedPort()}`
        })

        it('ensureImage uses a present image as it is: no pull, no build', async () => {
          const recipe = busyboxRecipe(`unused-${run}`, 'unused')
          const stages: string[] = []
          const report = await rt.ensureImage!(opts.image, { recipe, onProgress: (stage) => stages.push(stage) })
          expect(report.source).toBe('present')
          expect(report.id).toMatch(/^sha256:[0-9a-f]{64}$/)
          expect(recipe.builds).toBe(0)
          expect(stages).toEqual([])
        })

        it('builds a missing image no registry has from the recipe, once for concurrent callers; containers run it', async () => {
          const ref = `${registry}/berth-conformance-${run}:v1`
          builtImages.push(ref)
          const recipe = busyboxRecipe(`conf-${run}-1`, 'first recipe')
          const stages: string[] = []
          const reports = await Promise.all([
            rt.ensureImage!(ref, { recipe, onProgress: (stage) => stages.push(stage) }),
            rt.ensureImage!(ref, { recipe }),
            rt.ensureImage!(ref, { recipe }),
          ])
          expect(recipe.builds).toBe(1)
          expect(stages).toEqual(['pulling', 'building'])
          expect(reports[0]).toMatchObject({ ref, source: 'built', recipe: `conf-${run}-1` })
          expect(reports[1]).toEqual(reports[0])
          expect(reports[2]).toEqual(reports[0])

          const id = await make({ image: ref })
          expect((await sh(id, 'cat /marker; echo "|$PATH"')).stdout).toBe('first recipe|/bin\n')

          // Built already: reused, not rebuilt.
          const again = await rt.ensureImage!(ref, { recipe })
          expect(again).toMatchObject({ ref, id: reports[0]!.id, source: 'present', recipe: `conf-${run}-1` })
          expect(recipe.builds).toBe(1)
        })

        it('rebuilds an image Berth built from another recipe; a container of the old one keeps running', async () => {
          const ref = `${registry}/berth-conformance-${run}:v2`
          builtImages.push(ref)
          const first = await rt.ensureImage!(ref, { recipe: busyboxRecipe(`conf-${run}-a`, 'recipe a') })
          builtImages.push(first.id) // kept untagged while its container runs
          const old = await make({ image: ref })
          const changed = busyboxRecipe(`conf-${run}-b`, 'recipe b')
          const second = await rt.ensureImage!(ref, { recipe: changed })
          expect(second).toMatchObject({ ref, source: 'built', recipe: `conf-${run}-b` })
          expect(second.id).not.toBe(first.id)
          expect(changed.builds).toBe(1)
          expect((await sh(await make({ image: ref }), 'cat /marker')).stdout).toBe('recipe b')
          expect((await sh(old, 'cat /marker')).stdout).toBe('recipe a')
        })

        it('a missing image that cannot be pulled and has no recipe is CONTAINER_FAILED not_found, naming it', async () => {
          const ref = `${registry}/berth-conformance-absent-${run}:v1`
          const details = await expectContainerFailure(rt.ensureImage!(ref), 'not_found')
          expect(details.image).toBe(ref)
          await expectContainerFailure(rt.create({ image: ref, cmd: [...IDLE_COMMAND], labels: runLabels }))
        })
      })
    }

    it('fails with CONTAINER_FAILED when the engine is not there', async () => {
      const down = await opts.makeUnreachable()
      const t0 = Date.now()
      if (down.ensureImage) await expectContainerFailure(down.ensureImage(opts.image), 'unreachable')
      await expectContainerFailure(down.ping(), 'unreachable')
      await expectContainerFailure(down.create({ image: opts.image, cmd: [...IDLE_COMMAND] }), 'unreachable')
      await expectContainerFailure(down.list(), 'unreachable')
      await expectContainerFailure(down.exec('whatever', { cmd: ['true'] }), 'unreachable')
      expect(Date.now() - t0).toBeLessThan(10_000)
    })

    it('rejects a running exec with CONTAINER_FAILED, promptly, when the container is killed from outside', async () => {
      const id = await make()
      const proc: ExecProcess = await rt.exec(id, { cmd: ['sh', '-c', 'echo started; sleep 120; echo never'] })
      const out: string[] = []
      const reading = (async () => {
        for await (const c of proc.stdout) out.push(text([c]))
      })()
      while (!out.join('').includes('started')) await new Promise((r) => setTimeout(r, 20))
      const t0 = Date.now()
      await opts.killFromOutside(id)
      const details = await expectContainerFailure(proc.exit, 'died')
      const took = Date.now() - t0
      expect(took).toBeLessThan(opts.deathDetectionMs ?? 10_000)
      expect(details.id).toBe(id)
      await reading // the output streams end too
      expect(out.join('')).not.toContain('never')
    })
  })
}
