/** Workspace disks on this host (the tests run as root): two releasers of one disk at once both succeed; which disks have a journal. */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
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

it("a container's disk has no ext4 journal (it goes with its container), a volume's disk keeps one", async () => {
  const disks = workspaceDisks({ dir })
  const features = (mount: string) =>
    /^Filesystem features:\s*(.*)$/m
      .exec(
        execFileSync('dumpe2fs', ['-h', `${mount}.img`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }),
      )![1]!
      .split(/\s+/)
  const blocks = (mount: string) => statSync(`${mount}.img`).blocks
  const container = await disks.make('berth-0123456789ab', 1024 ** 3)
  const volume = await disks.make('berth-ws-journal-test', 1024 ** 3)
  try {
    expect(features(container)).not.toContain('has_journal')
    expect(features(volume)).toContain('has_journal')
    // The journal is most of what a fresh disk writes to the host.
    expect(blocks(container)).toBeLessThan(blocks(volume) / 4)
  } finally {
    await releaseDisk(container)
    await releaseDisk(volume)
  }
})
