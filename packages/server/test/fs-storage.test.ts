/** The embedded fs storage under concurrency: reads racing writes never see a torn record. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import { afterAll, describe, expect, it } from 'vitest'
import { atomicFsDriver } from '../src/fs-storage.js'

const base = join(mkdtempSync(join(tmpdir(), 'berth-fs-storage-')), 'store')
afterAll(() => rmSync(join(base, '..'), { recursive: true, force: true }))

describe('atomicFsDriver', () => {
  it('a read racing writes of the same key always sees a whole record, and listings never see a temporary file', async () => {
    const storage = createStorage({ driver: atomicFsDriver({ base }) })
    const pad = 'x'.repeat(64 * 1024)
    await storage.setItem('tasks:usr_1:task_1', { status: 'queued', pad })
    const seen: unknown[] = []
    await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        if (i % 2) await storage.setItem('tasks:usr_1:task_1', { status: `s${i}`, pad })
        else seen.push(await storage.getItem('tasks:usr_1:task_1'))
      }),
    )
    expect(seen).toHaveLength(150)
    for (const v of seen) expect(v).toMatchObject({ status: expect.any(String), pad })
    expect(await storage.getKeys('')).toEqual(['tasks:usr_1:task_1'])
  })
})
