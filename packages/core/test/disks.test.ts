/** Workspace disks on this host (the tests run as root): two releasers of one disk at once both succeed. */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { releaseDisk, workspaceDisks } from '../src/runtime/disks.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-disks-race-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

it('a disk released by two at once (a server reaping its container, another runtime removing it) is gone, neither fails', async () => {
  const disks = workspaceDisks({ dir })
  for (let i = 0; i < 5; i++) {
    const mount = await disks.make(`berth-${'0'.repeat(11)}${i}`, 8 * 1024 ** 2)
    await Promise.all([releaseDisk(mount), releaseDisk(mount), releaseDisk(mount)])
    expect(readdirSync(dir)).toEqual([])
  }
})
