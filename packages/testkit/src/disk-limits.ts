import { execFile } from 'node:child_process'
import { mkdtemp, readFile, readdir, rm, statfs, utimes, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { randomBytes } from 'node:crypto'
import {
  DISK_LABEL,
  IDLE_COMMAND,
  collectExec,
  releaseDisk,
  silentLogger,
  sweepOrphanDisks,
  workspaceDisks,
  type ContainerRuntime,
} from '@berth/core'
import { afterAll, describe, expect, it } from 'vitest'

const MiB = 1024 ** 2
const run = promisify(execFile)

/** What {@link diskLimitSuite} runs against. */
export interface DiskLimitOptions {
  /** An image with a POSIX shell and `fallocate` (busybox's will do). */
  image: string
  /** The host directory the runtime makes its workspace disks in (their files are checked gone after remove). */
  diskDir: string
  /**
   * Whether the container's root is read-only with every other writable path sized (default
   * true, the engines'); false: the local runtime's sandbox, where the agent's user can write
   * only the workspace and `/tmp`, and root's HOME is sized.
   */
  readOnlyRoot?: boolean
}

/**
 * Disk limits that hold: a container with `limits.diskBytes` and `limits.tmpBytes` cannot
 * fill the host's filesystem from `/workspace` or `/tmp` (a 2 GiB `fallocate` fails with
 * ENOSPC at the limit, the host's free space barely moves), nor from anywhere else (its root
 * is read-only, `$HOME`, `/var/tmp` and `/run` are sized), nor through a volume made with
 * `sizeBytes` (a persistent session's), which grows online when asked for again larger;
 * removing the container, from another runtime instance too (a restarted server), removes
 * its workspace disk, and removing a volume its disk; a start-up sweep releases the disks
 * no container or volume references once they are older than its grace period.
 *
 * @example
 * ```ts
 * diskLimitSuite('docker', () => dockerRuntime({ socketPath, disks: { dir } }), { image: 'berth-test:latest', diskDir: dir })
 * ```
 */
export function diskLimitSuite(name: string, makeRuntime: () => ContainerRuntime, opts: DiskLimitOptions): void {
  describe(`disk limits: ${name}`, () => {
    const rt = makeRuntime()
    const made: string[] = []
    const volumes: string[] = []
    afterAll(async () => {
      for (const id of made) await rt.remove(id).catch(() => undefined)
      for (const v of volumes) await rt.removeVolume(v).catch(() => undefined)
      await rt.close?.()
    })
    const free = async () => {
      const s = await statfs(opts.diskDir)
      return s.bavail * s.bsize
    }

    /** A started container of the agent's user with a 64 MiB workspace disk and 32 MiB scratch. */
    async function sizedContainer(): Promise<string> {
      const { id } = await rt.create({
        image: opts.image,
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        user: '1000:1000',
        network: 'none',
        limits: { diskBytes: 64 * MiB, tmpBytes: 32 * MiB },
        labels: { 'berth.test.run': randomBytes(4).toString('hex') },
      })
      made.push(id)
      await rt.start(id)
      return id
    }

    it('a 2 GiB fallocate fails at the limit in /workspace and in /tmp; the host keeps its space', async () => {
      const id = await sizedContainer()
      const before = await free()
      for (const dir of ['/workspace', '/tmp']) {
        const r = await collectExec(
          await rt.exec(id, { cmd: ['sh', '-c', `fallocate -l 2G ${dir}/big; e=$?; df -k ${dir} | tail -1; exit $e`] }),
        )
        expect(r.exitCode, `${dir}: ${r.stdout}${r.stderr}`).not.toBe(0)
        expect(r.stderr).toMatch(/no space left on device/i)
        // The filesystem there is the limit's size, not the host's.
        const sizeKb = Number(r.stdout.trim().split(/\s+/)[1])
        expect(sizeKb).toBeLessThanOrEqual(dir === '/tmp' ? 32 * 1024 : 64 * 1024)
      }
      // Smaller writes up to the limit work: the agent's own tools see a full disk, not an error of Berth's.
      const small = await collectExec(
        await rt.exec(id, {
          cmd: ['sh', '-c', 'dd if=/dev/zero of=/workspace/f bs=1M count=200 2>&1; ls -l /workspace/f'],
        }),
      )
      expect(small.stdout).toMatch(/no space left on device/i)
      // Other work shares this disk: the margin is wide, a 2 GiB write on the host would still show.
      expect((before - (await free())) / MiB).toBeLessThan(1024)
      expect(await readdir(opts.diskDir)).toHaveLength(2) // the image and its mount point
      // Removed by another instance (a restarted server): the container's label names its disk.
      const other = makeRuntime()
      await other.remove(id)
      await other.close?.()
      expect(await readdir(opts.diskDir)).toEqual([])
    })

    if (opts.readOnlyRoot ?? true)
      it('outside /workspace and /tmp: the root is read-only and every writable path stops at its size', async () => {
        const id = await sizedContainer()
        const before = await free()
        // As root, who may write anywhere the container lets anyone write.
        const fill = async (path: string) =>
          collectExec(
            await rt.exec(id, {
              user: '0',
              cmd: ['sh', '-c', `fallocate -l 2G ${path}; e=$?; rm -f ${path}; exit $e`],
            }),
          )
        for (const dir of ['/var/tmp', '/run', '/home', '/root']) {
          const r = await fill(`${dir}/big`)
          expect(r.exitCode, `${dir}: ${r.stderr}`).not.toBe(0)
          expect(r.stderr, dir).toMatch(/no space left on device/i)
        }
        for (const dir of ['', '/etc', '/usr', '/var', '/workspace/..']) {
          const r = await fill(`${dir}/big`)
          expect(r.exitCode, `${dir}/: ${r.stderr}`).not.toBe(0)
          expect(r.stderr, `${dir}/`).toMatch(/read-only file system/i)
        }
        expect((before - (await free())) / MiB).toBeLessThan(1024)
      })

    if (opts.readOnlyRoot === false)
      it("outside /workspace and /tmp: the agent's user can write nowhere, and root's HOME stops at its size", async () => {
        const id = await sizedContainer()
        const before = await free()
        const fill = async (user: string, path: string) =>
          collectExec(
            await rt.exec(id, { user, cmd: ['sh', '-c', `fallocate -l 2G ${path}; e=$?; rm -f ${path}; exit $e`] }),
          )
        for (const dir of ['', '/etc', '/usr', '/var', '/run', '/home', '/root', '/dev/shm']) {
          const r = await fill('1000', `${dir}/big`)
          expect(r.exitCode, `${dir}/: ${r.stderr}`).not.toBe(0)
          expect(r.stderr, `${dir}/`).toMatch(/permission denied|read-only file system|no such file or directory/i)
        }
        const home = await fill('0', '/root/big')
        expect(home.exitCode, home.stderr).not.toBe(0)
        expect(home.stderr).toMatch(/no space left on device/i)
        expect((before - (await free())) / MiB).toBeLessThan(1024)
      })

    /** A started container with `volume` at its workspace. */
    async function volumeContainer(volume: string): Promise<{ id: string }> {
      const { id } = await rt.create({
        image: opts.image,
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        network: 'none',
        mounts: [{ type: 'volume', source: volume, target: '/workspace' }],
      })
      made.push(id)
      await rt.start(id)
      return { id }
    }

    it('a volume made with sizeBytes is a disk of that size, and removing the volume removes it', async () => {
      const volume = `berth-ws-test${randomBytes(4).toString('hex')}`
      volumes.push(volume)
      await rt.createVolume(volume, { labels: { 'berth.test.run': volume }, sizeBytes: 64 * MiB })
      const { id } = await rt.create({
        image: opts.image,
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        user: '1000:1000',
        network: 'none',
        mounts: [{ type: 'volume', source: volume, target: '/workspace' }],
        limits: { diskBytes: 64 * MiB, tmpBytes: 32 * MiB },
        labels: { 'berth.test.run': volume },
      })
      made.push(id)
      await rt.start(id)
      const before = await free()
      const r = await collectExec(
        await rt.exec(id, {
          cmd: [
            'sh',
            '-c',
            'echo kept > /workspace/f; fallocate -l 2G /workspace/big; e=$?; df -k /workspace | tail -1; exit $e',
          ],
        }),
      )
      expect(r.exitCode, r.stderr).not.toBe(0)
      expect(r.stderr).toMatch(/no space left on device/i)
      expect(Number(r.stdout.trim().split(/\s+/)[1])).toBeLessThanOrEqual(64 * 1024)
      expect((before - (await free())) / MiB).toBeLessThan(1024)
      // The volume outlives its container, with its files; creating it again leaves it as it is.
      await rt.remove(id)
      await rt.createVolume(volume, { labels: { 'berth.test.run': volume }, sizeBytes: 64 * MiB })
      const again = await volumeContainer(volume)
      const kept = await collectExec(await rt.exec(again.id, { cmd: ['cat', '/workspace/f'] }))
      expect(kept.stdout.trim()).toBe('kept')
      // Asked for again larger while a container uses it: its files stay whole, whether it grew
      // online (with CAP_SYS_RESOURCE) or keeps its size until it is free.
      const sizeKbIn = async (id: string) => {
        const df = await collectExec(await rt.exec(id, { cmd: ['sh', '-c', 'df -k /workspace | tail -1'] }))
        return Number(df.stdout.trim().split(/\s+/)[1])
      }
      await rt.createVolume(volume, { labels: { 'berth.test.run': volume }, sizeBytes: 96 * MiB })
      expect(await sizeKbIn(again.id)).toBeLessThanOrEqual(96 * 1024)
      const inUse = await collectExec(await rt.exec(again.id, { cmd: ['cat', '/workspace/f'] }))
      expect(inUse.stdout.trim()).toBe('kept')
      await rt.remove(again.id)
      // Asked for again larger before its next container (a session coming back with a larger
      // disk_mb): grown, files kept; asked for smaller: left as it is (ext4 cannot shrink mounted).
      await rt.createVolume(volume, { labels: { 'berth.test.run': volume }, sizeBytes: 128 * MiB })
      const next = await volumeContainer(volume)
      const grown = await sizeKbIn(next.id)
      expect(grown).toBeGreaterThan(96 * 1024)
      expect(grown).toBeLessThanOrEqual(128 * 1024)
      await rt.createVolume(volume, { labels: { 'berth.test.run': volume }, sizeBytes: 32 * MiB })
      expect(await sizeKbIn(next.id)).toBe(grown)
      const still = await collectExec(await rt.exec(next.id, { cmd: ['cat', '/workspace/f'] }))
      expect(still.stdout.trim()).toBe('kept')
      await rt.remove(next.id)
      expect(await readdir(opts.diskDir)).toEqual(expect.arrayContaining([volume, `${volume}.img`]))
      // Removed by another instance (a restarted server): the volume's label names its disk.
      const other = makeRuntime()
      await other.removeVolume(volume)
      await other.close?.()
      expect(await readdir(opts.diskDir)).not.toContain(volume)
      expect(await readdir(opts.diskDir)).not.toContain(`${volume}.img`)
    })

    it('a start-up sweep releases an old orphan disk and keeps a fresh one, a referenced one and one in use elsewhere', async () => {
      const disks = workspaceDisks({ dir: opts.diskDir })
      // As a server killed between making a disk and creating its container leaves them.
      const { mount: orphan } = await disks.make(`berth-${randomBytes(6).toString('hex')}`, 16 * MiB)
      const { mount: fresh } = await disks.make(`berth-${randomBytes(6).toString('hex')}`, 16 * MiB)
      // Unreferenced here but in use elsewhere (mounted again, as another engine's container would hold it).
      const { mount: busy } = await disks.make(`berth-${randomBytes(6).toString('hex')}`, 16 * MiB)
      const elsewhere = await mkdtemp(join(tmpdir(), 'berth-disk-user-'))
      await run('mount', ['--bind', busy, elsewhere])
      try {
        const id = await sizedContainer()
        const used = (await rt.list({ labels: { [DISK_LABEL]: true }, all: true })).find((c) => c.id === id)?.labels[
          DISK_LABEL
        ]
        expect(used).toBeTruthy()
        const hourAgo = new Date(Date.now() - 3_600_000)
        for (const disk of [orphan, used, busy]) await utimes(`${disk}.img`, hourAgo, hourAgo)
        const released = await sweepOrphanDisks({ dir: opts.diskDir, runtime: rt, logger: silentLogger })
        expect(released).toEqual([orphan])
        const left = await readdir(opts.diskDir)
        expect(left).not.toContain(`${orphan.split('/').pop()}.img`)
        expect(await readFile('/proc/self/mountinfo', 'utf8')).not.toContain(` ${orphan} `)
        for (const kept of [fresh, `${used}`, busy]) expect(left).toContain(`${kept.split('/').pop()}.img`)
        // The busy one is mounted here again, the same filesystem its user writes to.
        await writeFile(join(elsewhere, 'x'), 'same')
        expect(await readFile(join(busy, 'x'), 'utf8')).toBe('same')
        // The container still writes to its disk.
        const r = await collectExec(
          await rt.exec(id, { cmd: ['sh', '-c', 'echo ok > /workspace/f && cat /workspace/f'] }),
        )
        expect(r.stdout.trim()).toBe('ok')
      } finally {
        // Whatever the sweep left (all of it, when it is broken): no loop disk outlives the suite.
        await run('umount', [elsewhere])
        await rm(elsewhere, { recursive: true, force: true })
        for (const disk of [orphan, fresh, busy]) await releaseDisk(disk)
      }
    })
  })
}
