import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  type ApiError,
  ContainerError,
  byteChannel,
  collectExec,
  defineRuntime,
  isContainerError,
  toByteChunks,
  type ContainerRuntime,
} from '@berth/core'
import { packTar, readTar } from '../src/index.js'

const enc = new TextEncoder()

function fakeRuntime(failWith: unknown): ContainerRuntime {
  const boom = async (): Promise<never> => {
    throw failWith
  }
  return {
    name: 'fake',
    capabilities: { isolation: false, limits: false },
    ping: boom,
    create: boom,
    start: boom,
    stop: boom,
    remove: boom,
    createVolume: boom,
    listVolumes: boom,
    removeVolume: boom,
    exec: boom,
    putArchive: boom,
    getArchive: boom,
    listFiles: boom,
    readFile: boom,
    archiveFiles: boom,
    writeFiles: boom,
    list: boom,
    inspect: boom,
    stats: boom,
  }
}

describe('defineRuntime', () => {
  it('turns stray errors into CONTAINER_FAILED naming the runtime and operation', async () => {
    const make = defineRuntime((cause: unknown) => fakeRuntime(cause))
    const err = await make(new TypeError('socket hang up'))
      .inspect('c1')
      .catch((e: unknown) => e)
    expect(isContainerError(err, 'engine_error')).toBe(true)
    expect((err as ApiError).status).toBe(502)
    expect((err as ApiError).details).toMatchObject({ runtime: 'fake', op: 'inspect' })
    expect((err as Error).message).toContain('socket hang up')
    const execErr = await make(new Error('x'))
      .exec('c1', { cmd: ['true'] })
      .catch((e: unknown) => e)
    expect(isContainerError(execErr)).toBe(true)
  })

  it('passes ApiErrors through unchanged and keeps name/capabilities', async () => {
    const original = new ContainerError('not_found', 'No such container: c1', { id: 'c1' })
    const rt = defineRuntime(() => fakeRuntime(original))()
    await expect(rt.inspect('c1')).rejects.toBe(original)
    expect(rt.name).toBe('fake')
    expect(rt.capabilities.isolation).toBe(false)
    expect(original.toJSON()).toEqual({
      error: 'No such container: c1',
      code: 'CONTAINER_FAILED',
      details: { reason: 'not_found', id: 'c1' },
    })
  })
})

describe('byteChannel / collectExec / toByteChunks', () => {
  afterEach(() => {
    vi.useRealTimers()
  })
  it('buffers until read, ends after end(), or feeds a callback instead', async () => {
    // Fake timers: the later push comes when the test says, while the reader waits for it.
    vi.useFakeTimers()
    const ch = byteChannel()
    ch.push(enc.encode('a'))
    setTimeout(() => {
      ch.push(enc.encode('b'))
      ch.end()
    }, 10)
    const got: string[] = []
    const reading = (async () => {
      for await (const c of ch) got.push(Buffer.from(c).toString())
    })()
    await vi.advanceTimersByTimeAsync(5)
    // Half way: the first chunk is read, the reader waits for more.
    expect(got).toEqual(['a'])
    await vi.advanceTimersByTimeAsync(5)
    await reading
    expect(got).toEqual(['a', 'b'])

    const seen: string[] = []
    const cb = byteChannel((c) => seen.push(Buffer.from(c).toString()))
    cb.push(enc.encode('x'))
    cb.end()
    const rest: Uint8Array[] = []
    for await (const c of cb) rest.push(c)
    expect(seen).toEqual(['x'])
    expect(rest).toEqual([])
  })

  it('collects a process and normalises stdin sources', async () => {
    const out = byteChannel()
    const err = byteChannel()
    out.push(enc.encode('hi'))
    out.end()
    err.end()
    const r = await collectExec({
      stdout: out,
      stderr: err,
      exit: Promise.resolve({ exitCode: 3, killed: false }),
      kill: async () => {},
    })
    expect(r).toEqual({ exitCode: 3, killed: false, stdout: 'hi', stderr: '' })
    async function* mixed() {
      yield 'a'
      yield enc.encode('b')
    }
    const chunks: string[] = []
    for await (const c of toByteChunks(mixed())) chunks.push(Buffer.from(c).toString())
    expect(chunks).toEqual(['a', 'b'])
  })
})

describe('tar helpers', () => {
  it('round-trip files and directories', async () => {
    const tar = await packTar([
      { name: 'd/', type: 'directory' },
      { name: 'd/f.bin', content: new Uint8Array([1, 2, 3]) },
    ])
    const entries = await readTar(tar)
    expect(entries.map((e) => [e.name, e.type])).toEqual([
      ['d/', 'directory'],
      ['d/f.bin', 'file'],
    ])
    expect([...entries[1]!.content]).toEqual([1, 2, 3])
  })
})
