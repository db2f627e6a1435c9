/** Workspace disks on this host (the tests run as root): releases that race, what the workspace holds, and which disks have a journal. */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { releaseDisk, tidyOldDisks, workspaceDisks } from '../src/runtime/disks.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-disks-race-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

it('a disk released by two at once (a server reaping its container, another runtime removing it) is gone, neither fails', async () => {
  const disks = workspaceDisks({ dir })
  for (let i = 0; i < 5; i++) {
    const { mount } = await disks.make(`berth-${'0'.repeat(11)}${i}`, 8 * 1024 ** 2)
    await Promise.all([releaseDisk(mount), releaseDisk(mount), releaseDisk(mount)])
    expect(readdirSync(dir)).toEqual([])
  }
})

it("a disk's workspace holds none of its filesystem's entries, also after e2fsck and a remount", async () => {
  const disks = workspaceDisks({ dir })
  const name = 'berth-ws-fresh'
  const { mount, source } = await disks.make(name, 8 * 1024 ** 2)
  try {
    expect(source).toBe(join(mount, 'workspace'))
    expect(readdirSync(source)).toEqual([])
    writeFileSync(join(source, 'a.txt'), 'kept')
    // As after a reboot: unmounted, checked (e2fsck makes lost+found where it is missing), mounted again.
    execFileSync('umount', [mount])
    execFileSync('debugfs', ['-w', '-R', 'rmdir lost+found', `${mount}.img`], { stdio: 'ignore' })
    e2fsck(`${mount}.img`)
    expect(await disks.remount(name)).toBe(mount)
    expect(readdirSync(source)).toEqual(['a.txt'])
    // Made again (its volume record lost): the same workspace directory.
    expect(await disks.make(name, 8 * 1024 ** 2)).toEqual({ mount, source })
  } finally {
    await releaseDisk(mount)
  }
})

it("an earlier version's disk (its workspace the filesystem's root) loses ext4's lost+found when mounted or adopted, its files kept", async () => {
  const disks = workspaceDisks({ dir })
  const name = 'berth-ws-earlier'
  const image = join(dir, `${name}.img`)
  const mount = join(dir, name)
  // Made as earlier versions made disks: no label, the root bound at /workspace.
  writeFileSync(image, '')
  truncateSync(image, 8 * 1024 ** 2)
  execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', image])
  mkdirSync(mount)
  execFileSync('mount', ['-o', 'loop,nosuid,nodev', image, mount])
  try {
    writeFileSync(join(mount, 'a.txt'), 'kept')
    expect(readdirSync(mount).sort()).toEqual(['a.txt', 'lost+found'])
    // Still mounted at start (its container or volume adopted): tidied there.
    await tidyOldDisks(dir)
    expect(readdirSync(mount)).toEqual(['a.txt'])
    // Checked offline (lost+found made again), then mounted by a make or a remount: tidied there.
    execFileSync('umount', [mount])
    e2fsck(image)
    expect(await disks.make(name, 8 * 1024 ** 2)).toEqual({ mount, source: mount })
    expect(readdirSync(mount)).toEqual(['a.txt'])
    execFileSync('umount', [mount])
    e2fsck(image)
    await disks.remount(name)
    expect(readdirSync(mount)).toEqual(['a.txt'])
    expect(existsSync(join(mount, 'workspace'))).toBe(false)
  } finally {
    await releaseDisk(mount)
  }
})

/** e2fsck -f -y, which makes lost+found again where it is missing (exit 1: errors corrected). */
function e2fsck(image: string): void {
  try {
    execFileSync('e2fsck', ['-f', '-y', image], { stdio: 'ignore' })
  } catch (err) {
    if ((err as { status?: number }).status !== 1) throw err
  }
}

it("a container's disk has no ext4 journal (it goes with its container), a volume's disk keeps one", async () => {
  const disks = workspaceDisks({ dir })
  const features = (mount: string) =>
    /^Filesystem features:\s*(.*)$/m
      .exec(
        execFileSync('dumpe2fs', ['-h', `${mount}.img`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }),
      )![1]!
      .split(/\s+/)
  const blocks = (mount: string) => statSync(`${mount}.img`).blocks
  const container = (await disks.make('berth-0123456789ab', 1024 ** 3)).mount
  const volume = (await disks.make('berth-ws-journal-test', 1024 ** 3)).mount
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
