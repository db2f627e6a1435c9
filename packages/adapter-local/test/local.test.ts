import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { collectExec, isContainerError, type Logger } from '@berth/core'
import { packTar, readTar } from '@berth/testkit'
import { localRuntime } from '../src/index.js'
import { hostPath, readMeta } from '../src/paths.js'

const dirs: string[] = []
const tempBase = () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-local-'))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

const recordingLogger = () => {
  const warnings: { msg: string; fields?: Record<string, unknown> }[] = []
  const logger: Logger = { info() {}, error() {}, warn: (msg, fields) => warnings.push({ msg, fields }) }
  return { logger, warnings }
}

describe('local runtime', () => {
  it('warns loudly on every create that nothing is isolated', async () => {
    const { logger, warnings } = recordingLogger()
    const rt = localRuntime({ baseDir: tempBase(), logger, sandbox: 'none' })
    const { id } = await rt.create({ image: 'x', limits: { memoryBytes: 1 << 20 } })
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.msg).toMatch(/NO isolation/)
    expect(warnings[0]?.fields).toMatchObject({ id, ignoredLimits: { memoryBytes: 1 << 20 } })
    expect(rt.capabilities).toEqual({ isolation: false, limits: false, egress: [], outlivesServer: false })
    expect(rt.sandbox).toBe('none')
    expect(rt.description).toMatch(/NO ISOLATION/)
    await rt.remove(id)
  })

  it('says what the bubblewrap sandbox isolates, and does not warn on create', async () => {
    const { logger, warnings } = recordingLogger()
    const rt = localRuntime({ baseDir: tempBase(), logger, sandbox: 'bwrap' })
    const { id } = await rt.create({ image: 'x' })
    expect(warnings).toHaveLength(0)
    // The test machines run as root with a writable cgroupfs (as the engines need): limits are enforced.
    expect(rt.capabilities).toEqual({
      isolation: true,
      limits: true,
      unprivilegedUser: true,
      egress: ['none', 'public', 'allowlist'],
      outlivesServer: false,
    })
    expect(rt.sandbox).toBe('bwrap')
    expect(rt.description).toMatch(/bubblewrap sandbox: own mount, PID/)
    expect(rt.description).toMatch(/memory, CPU and pids limits through cgroups v[12]/)
    await rt.remove(id)
  })

  it('keeps containers on disk: a new runtime instance finds and drives them', async () => {
    const baseDir = tempBase()
    const { logger } = recordingLogger()
    const first = localRuntime({ baseDir, logger, sandbox: 'none' })
    const { id } = await first.create({ image: 'x', labels: { 'berth.pool': 'p' }, workingDir: '/workspace' })
    await first.start(id)
    const second = localRuntime({ baseDir, logger, sandbox: 'none' })
    expect((await second.inspect(id)).state).toBe('running')
    expect((await second.list({ labels: { 'berth.pool': 'p' } })).map((c) => c.id)).toEqual([id])
    expect((await collectExec(await second.exec(id, { cmd: ['pwd'] }))).stdout.trim()).toBe(
      hostPath(baseDir, id, '/workspace'),
    )
    const { pid } = await readMeta(baseDir, id)
    await second.remove(id)
    expect(existsSync(join(baseDir, id))).toBe(false)
    await vi.waitFor(() => expect(() => process.kill(pid!, 0)).toThrow(), 5_000) // the main process went with it
  })

  it('names an archive of a volume-mounted path after the container path, as Docker does', async () => {
    const baseDir = tempBase()
    const rt = localRuntime({ baseDir, logger: recordingLogger().logger, sandbox: 'none' })
    await rt.createVolume('berth-ws-a', { labels: {} })
    const { id } = await rt.create({
      image: 'x',
      workingDir: '/workspace',
      mounts: [{ type: 'volume', source: 'berth-ws-a', target: '/workspace' }],
    })
    await rt.start(id)
    await rt.putArchive(id, '/workspace', await packTar([{ name: 'a.txt', content: 'x' }]))
    const names = (await readTar(await rt.getArchive(id, '/workspace'))).map((e) => e.name)
    expect(names).toEqual(['workspace/', 'workspace/a.txt'])
    await rt.remove(id)
  })

  it('refuses archive entries that climb out of the target', async () => {
    const baseDir = tempBase()
    const rt = localRuntime({ baseDir, logger: recordingLogger().logger })
    const { id } = await rt.create({ image: 'x', workingDir: '/workspace' })
    await rt.start(id)
    const evil = await packTar([{ name: '../../escaped.txt', content: 'x' }])
    const err = await rt.putArchive(id, '/workspace', evil).catch((e: unknown) => e)
    expect(isContainerError(err)).toBe(true)
    expect(existsSync(join(baseDir, id, 'escaped.txt'))).toBe(false)
    expect(existsSync(join(baseDir, 'escaped.txt'))).toBe(false)
    await rt.remove(id)
  })
})
