/**
 * Kept files of released workspaces: the tar goes to the blob store with a small record,
 * each caller stays under its quota (oldest dropped first, other callers untouched), a tar
 * over the quota is not kept, and a record from before (base64 inside) still restores.
 */
import { packTar, readTar } from '@berth/testkit'
import { describe, expect, it } from 'vitest'
import { unstorageStore } from '../../server/src/store.js'
import { createStorage } from 'unstorage'
import { manualClock, memoryBlobs, silentLogger, type ContainerRuntime } from '@berth/core'
import { WorkspaceSnapshots } from '../src/workspaces/workspace-snapshots.js'

const KiB = 1024

/** A runtime whose containers' /workspace holds `files[id]` bytes in one file; `put` records restores. */
function fakeRuntime(files: Record<string, number>, put: Uint8Array[] = []) {
  return {
    async getArchive(id: string) {
      const tar = await packTar([
        { name: 'workspace/', type: 'directory' },
        { name: 'workspace/f.bin', content: new Uint8Array(files[id] ?? 0) },
      ])
      return (async function* () {
        yield tar
      })()
    },
    async putArchive(_id: string, _path: string, tar: Uint8Array) {
      put.push(tar)
    },
  } as unknown as ContainerRuntime
}

function setup(quotaBytes: number) {
  const store = unstorageStore(createStorage(), { cache: false })
  const blobs = memoryBlobs()
  const clock = manualClock(0)
  const snaps = new WorkspaceSnapshots({ store, blobs, clock, logger: silentLogger, quotaBytes })
  return { store, blobs, clock, snaps }
}

describe('WorkspaceSnapshots', () => {
  it("keeps tars as blobs; a caller over its quota loses its oldest, another caller's stay", async () => {
    const { store, blobs, clock, snaps } = setup(100 * KiB)
    const rt = fakeRuntime({ a: 40 * KiB, b: 40 * KiB, c: 40 * KiB, other: 40 * KiB })
    for (const [owner, ws] of [
      ['usr_1', 'ws_a'],
      ['usr_2', 'ws_other'],
      ['usr_1', 'ws_b'],
    ] as const) {
      clock.advance(1000)
      expect(await snaps.save(rt, ws.slice(3), owner, ws)).toBe(true)
    }
    const record = await store.get<Record<string, unknown>>('ws-files:usr_1:ws_a')
    expect(record).toMatchObject({ file: 'usr_1/ws_a.tar' })
    expect(record).not.toHaveProperty('tar')
    expect(await blobs.get('usr_1/ws_a.tar')).not.toBeNull()
    clock.advance(1000)
    expect(await snaps.save(rt, 'c', 'usr_1', 'ws_c')).toBe(true)
    expect(await snaps.has('usr_1', 'ws_a')).toBe(false)
    expect(await blobs.get('usr_1/ws_a.tar')).toBeNull()
    expect(await snaps.has('usr_1', 'ws_b')).toBe(true)
    expect(await snaps.has('usr_1', 'ws_c')).toBe(true)
    expect(await snaps.has('usr_2', 'ws_other')).toBe(true)
  })

  it('a tar over the whole quota is not kept; an old base64 record still restores', async () => {
    const { store, snaps } = setup(100 * KiB)
    expect(await snaps.save(fakeRuntime({ big: 200 * KiB }), 'big', 'usr_1', 'ws_big')).toBe(false)
    expect(await snaps.has('usr_1', 'ws_big')).toBe(false)
    const tar = await packTar([{ name: 'old.txt', content: 'from before' }])
    await store.set('ws-files:usr_1:ws_old', { tar: Buffer.from(tar).toString('base64'), saved_at: 0 })
    const put: Uint8Array[] = []
    expect(await snaps.restore(fakeRuntime({}, put), 'helper', 'usr_1', 'ws_old')).toBe(true)
    expect((await readTar(put[0]!)).map((e) => [e.name, e.content.toString()])).toEqual([['old.txt', 'from before']])
  })
})
