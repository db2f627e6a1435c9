/**
 * Checkpoints of sessions, on a fake runtime whose `/workspace` is a map of files: each
 * distinct content is stored once, a checkpoint gives back its own files, retention (count
 * and age), the size cap, a rewind's drop and a deletion leave no content no checkpoint
 * names, and a failing checkpoint never throws.
 */
import { packTar, readTar } from '@berth/testkit'
import { createStorage } from 'unstorage'
import { beforeEach, describe, expect, it } from 'vitest'
import { unstorageStore } from '../../server/src/store.js'
import type { BlobStore } from '../src/ports/blob-store.js'
import { manualClock } from '../src/ports/clock.js'
import type { ContainerRuntime } from '../src/ports/container-runtime.js'
import type { Logger } from '../src/ports/logger.js'
import type { TaskEngine } from '../src/tasks/engine.js'
import { Checkpoints, type CheckpointsOptions } from '../src/workspaces/checkpoints.js'
import { EventLog } from '../src/workspaces/event-log.js'
import type { WorkspaceRecord } from '../src/workspaces/workspaces.js'
import { taskRecord } from './task-fakes.js'

const OWNER = 'usr_ckpt'
const WS = { id: 'ws_ckpt', owner_id: OWNER, container_id: 'ctr_1' } as WorkspaceRecord
const KiB = 1024

/** Blobs in a map the test can look into. */
function mapBlobs(): BlobStore & { data: Map<string, Uint8Array> } {
  const data = new Map<string, Uint8Array>()
  return {
    data,
    put: async (key, bytes) => void data.set(key, bytes),
    get: async (key) => data.get(key) ?? null,
    remove: async (key) => void data.delete(key),
  }
}

function setup(opts: Partial<CheckpointsOptions> = {}) {
  const store = unstorageStore(createStorage(), { cache: false })
  const blobs = mapBlobs()
  const clock = manualClock(Date.parse('2026-01-01T00:00:00Z'))
  const warnings: string[] = []
  const logger: Logger = { info() {}, warn: (msg) => void warnings.push(msg), error() {} }
  /** The container's files (path under /workspace → content). */
  const files = new Map<string, string | Uint8Array>()
  let broken = false
  const runtime = {
    async getArchive(engineId: string, path: string) {
      expect([engineId, path]).toEqual(['eng_1', '/workspace'])
      if (broken) throw new Error('engine gone')
      const dirs = new Set<string>()
      for (const p of files.keys()) {
        const parts = p.split('/').slice(0, -1)
        for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join('/'))
      }
      const tar = await packTar([
        { name: 'workspace/', type: 'directory' },
        ...[...dirs].sort().map((d) => ({ name: `workspace/${d}/`, type: 'directory' as const })),
        ...[...files].map(([p, content]) => ({ name: `workspace/${p}`, content })),
      ])
      return (async function* () {
        yield tar
      })()
    },
  } as unknown as ContainerRuntime
  const engine = { runtime, pool: { list: () => [{ id: 'ctr_1', engine_id: 'eng_1' }] } } as unknown as TaskEngine
  const eventLog = new EventLog(store, clock)
  const checkpoints = new Checkpoints({ store, blobs, clock, logger, engine, eventLog, ...opts })
  /** One session task that ran, ended, and was checkpointed. */
  const task = async () => {
    const t = taskRecord({ owner_id: OWNER, mode: 'session', workspace_id: WS.id, started_at: '2026-01-01T00:00:00Z' })
    await eventLog.append(OWNER, WS.id, [{ type: 'result', task_id: t.id }])
    await checkpoints.keep(t, WS, `sdk-${t.id}`)
    clock.advance(1000)
    return t
  }
  const objects = () => [...blobs.data.keys()].filter((k) => k.includes('/objects/'))
  const contents = async (taskId: string) => {
    const tar = await checkpoints.files(OWNER, WS.id, taskId)
    return tar && Object.fromEntries((await readTar(tar)).map((e) => [e.name, e.content.toString('utf8')]))
  }
  return {
    store,
    blobs,
    clock,
    files,
    checkpoints,
    warnings,
    task,
    objects,
    contents,
    breakEngine: () => {
      broken = true
    },
  }
}

describe('Checkpoints', () => {
  let s: ReturnType<typeof setup>
  beforeEach(() => {
    s = setup()
  })

  it('stores each content once: a task that changes one small file adds that file and its manifest', async () => {
    s.files.set('big.bin', new Uint8Array(200 * KiB).fill(7))
    s.files.set('a.txt', 'one')
    s.files.set('.berth/claude/projects/s.jsonl', 'prompt 1')
    s.files.set('.berth/events/t1.jsonl', 'runner events')
    const t1 = await s.task()
    s.files.set('a.txt', 'two')
    s.files.set('.berth/claude/projects/s.jsonl', 'prompt 1\nprompt 2')
    const t2 = await s.task()
    const [c1, c2] = await s.checkpoints.list(OWNER, WS.id)
    expect(c1).toMatchObject({ task_id: t1.id, sdk_session_id: `sdk-${t1.id}`, files: 3, seq: 1 })
    expect(c2).toMatchObject({ task_id: t2.id, sdk_session_id: `sdk-${t2.id}`, files: 3, seq: 2 })
    expect(c1!.added_bytes).toBeGreaterThan(200 * KiB)
    expect(c2!.added_bytes).toBeLessThan(2 * KiB)
    expect(c2!.bytes).toBeGreaterThan(200 * KiB)
    // big.bin, a.txt twice, the conversation twice; never the runner's events.
    expect(s.objects()).toHaveLength(5)
    expect(await s.contents(t1.id)).toMatchObject({ 'a.txt': 'one', '.berth/claude/projects/s.jsonl': 'prompt 1' })
    const second = await s.contents(t2.id)
    expect(second).toMatchObject({ 'a.txt': 'two', '.berth/claude/projects/s.jsonl': 'prompt 1\nprompt 2' })
    expect(second!['big.bin']).toHaveLength(200 * KiB)
    expect(Object.keys(second!).some((name) => name.startsWith('.berth/events'))).toBe(false)
  })

  it('keeps the newest per session and drops what only the older ones held', async () => {
    s = setup({ maxPerSession: 2 })
    s.files.set('kept.txt', 'same')
    for (const v of ['v1', 'v2', 'v3']) {
      s.files.set('changing.txt', v)
      await s.task()
    }
    const kept = await s.checkpoints.list(OWNER, WS.id)
    expect(kept).toHaveLength(2)
    // kept.txt, v2 and v3: v1 went with the first checkpoint.
    expect(s.objects()).toHaveLength(3)
    expect(await s.contents(kept[0]!.task_id)).toMatchObject({ 'changing.txt': 'v2', 'kept.txt': 'same' })
  })

  it('expires checkpoints past the retention, and takes their space back at the next one', async () => {
    s = setup({ retentionMs: 60_000 })
    s.files.set('a.txt', 'old')
    const t1 = await s.task()
    s.clock.advance(120_000)
    expect(await s.checkpoints.find(OWNER, WS.id, t1.id)).toBeNull()
    s.files.set('a.txt', 'new')
    const t2 = await s.task()
    expect((await s.checkpoints.list(OWNER, WS.id)).map((c) => c.task_id)).toEqual([t2.id])
    expect(s.objects()).toHaveLength(1)
  })

  it('skips a workspace over the cap, saying so, and leaves nothing of it', async () => {
    s = setup({ maxBytes: 100 * KiB })
    s.files.set('a.txt', 'small')
    s.files.set('huge.bin', new Uint8Array(150 * KiB))
    await s.task()
    expect(await s.checkpoints.list(OWNER, WS.id)).toEqual([])
    expect(s.warnings).toContain('workspace too large for a checkpoint')
    expect(s.blobs.data.size).toBe(0)
  })

  it('drops the checkpoints after a task (a rewind) and everything with the workspace', async () => {
    s.files.set('a.txt', '1')
    const t1 = await s.task()
    s.files.set('b.txt', '2')
    await s.task()
    s.files.set('c.txt', '3')
    await s.task()
    await s.checkpoints.dropAfter(OWNER, WS.id, t1.id)
    expect((await s.checkpoints.list(OWNER, WS.id)).map((c) => c.task_id)).toEqual([t1.id])
    expect(s.objects()).toHaveLength(1)
    expect([...s.blobs.data.keys()].filter((k) => k.includes('/manifests/'))).toHaveLength(1)
    await s.checkpoints.remove(OWNER, WS.id)
    expect(s.blobs.data.size).toBe(0)
    expect(await s.store.get(`ws-checkpoints:${OWNER}:${WS.id}`)).toBeNull()
  })

  it('never fails the task: an engine error is logged and nothing is kept', async () => {
    s.files.set('a.txt', '1')
    s.breakEngine()
    await expect(s.task()).resolves.toBeDefined()
    expect(s.warnings).toContain('could not keep a checkpoint')
    expect(await s.checkpoints.list(OWNER, WS.id)).toEqual([])
  })

  it('takes none for a batch task, a task that never ran, or a container this instance does not hold', async () => {
    s.files.set('a.txt', '1')
    const base = { owner_id: OWNER, workspace_id: WS.id, started_at: '2026-01-01T00:00:00Z' }
    await s.checkpoints.keep(taskRecord({ ...base, mode: 'batch' }), WS, null)
    await s.checkpoints.keep(taskRecord({ ...base, mode: 'session', started_at: null }), WS, null)
    await s.checkpoints.keep(taskRecord({ ...base, mode: 'session' }), { ...WS, container_id: 'ctr_x' }, null)
    expect(await s.checkpoints.list(OWNER, WS.id)).toEqual([])
    expect(s.blobs.data.size).toBe(0)
  })
})
