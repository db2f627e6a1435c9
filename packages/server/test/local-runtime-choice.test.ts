/**
 * Choosing the local runtime (issue 29): in a bubblewrap sandbox where bwrap works; without
 * it, only when the operator said `BERTH_RUNTIME=local` and `BERTH_LOCAL_UNSANDBOXED=true`.
 * `auto` falling back to an unsandboxed local runtime refuses to start, naming the ways out.
 * A root server's local runtime sizes workspaces on disks under `BERTH_DISK_DIR`, as the
 * engines do, and releases the old orphans there at start.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { utimes } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { localRuntime } from '@berth/adapter-local'
import { DISK_LABEL, IDLE_COMMAND, releaseDisk, workspaceDisks } from '@berth/core'
import { configFromEnv, localFor, NO_ISOLATION_WARNING } from '@berth/server'
import { afterAll, describe, expect, it, vi } from 'vitest'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-local-choice-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** A local runtime as it is on a machine without bubblewrap. */
const withoutBwrap = (() => ({
  sandbox: 'none',
  description: 'NO ISOLATION (bwrap is not installed (Debian: apt-get install bubblewrap)): plain host processes',
})) as unknown as typeof localRuntime

describe('choosing the local runtime', () => {
  it('auto without an engine and without bubblewrap refuses, naming both ways out', () => {
    const warnings: string[] = []
    const config = { dataDir, localUnsandboxed: true } // even with the opt-out: auto never runs unsandboxed
    expect(() => localFor(config, (w) => warnings.push(w), { explicit: false, make: withoutBwrap })).toThrow(
      /Start Docker or Podman or install bubblewrap.*set BERTH_RUNTIME=local and BERTH_LOCAL_UNSANDBOXED=true/,
    )
    expect(warnings).toEqual([])
  })

  it('BERTH_RUNTIME=local without bubblewrap needs BERTH_LOCAL_UNSANDBOXED=true, then warns loudly', () => {
    const warnings: string[] = []
    const warn = (w: string) => warnings.push(w)
    expect(() => localFor({ dataDir, localUnsandboxed: false }, warn, { explicit: true, make: withoutBwrap })).toThrow(
      /BERTH_RUNTIME=local, but the local runtime cannot sandbox.*BERTH_LOCAL_UNSANDBOXED=true/,
    )
    const chosen = localFor({ dataDir, localUnsandboxed: true }, warn, { explicit: true, make: withoutBwrap })
    expect(chosen.description).toMatch(/NO ISOLATION/)
    expect(warnings).toEqual([NO_ISOLATION_WARNING])
  })

  it('uses bubblewrap where it works, explicit or not', () => {
    const warnings: string[] = []
    const chosen = localFor({ dataDir, localUnsandboxed: false }, (w) => warnings.push(w), { explicit: false })
    expect(chosen.description).toMatch(/bubblewrap sandbox/)
    expect(warnings.join('\n')).not.toContain('NO CONTAINER ISOLATION')
  })

  it('as root: workspaces on disks under the disk directory, old orphan disks released at start', async () => {
    expect(process.getuid?.()).toBe(0) // the project's machines run the tests as root
    const diskDir = join(dataDir, 'disks')
    const { mount: orphan } = await workspaceDisks({ dir: diskDir }).make('berth-0123456789ab', 16 * 1024 ** 2)
    const hourAgo = new Date(Date.now() - 3_600_000)
    await utimes(`${orphan}.img`, hourAgo, hourAgo)
    const warnings: string[] = []
    const { runtime } = localFor({ dataDir, localUnsandboxed: false }, (w) => warnings.push(w), { explicit: true })
    try {
      await vi.waitFor(() => expect(warnings.join('\n')).toContain('orphan disks released'), { timeout: 10_000 })
      expect(existsSync(`${orphan}.img`)).toBe(false)
      const { id } = await runtime.create({
        image: 'ignored-by-local',
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        limits: { diskBytes: 16 * 1024 ** 2 },
      })
      const disk = (await runtime.inspect(id)).labels[DISK_LABEL]
      expect(disk).toMatch(new RegExp(`^${diskDir}/berth-[0-9a-f]{12}$`))
      await runtime.remove(id)
      expect(existsSync(`${disk}.img`)).toBe(false)
    } finally {
      await releaseDisk(orphan)
      await runtime.close?.()
    }
    // BERTH_DISK_DIR=off: no disk, the workspace a plain directory.
    const off = localFor({ dataDir, diskDir: null }, () => {}, { explicit: true }).runtime
    const { id } = await off.create({ image: 'x', workingDir: '/workspace', limits: { diskBytes: 16 * 1024 ** 2 } })
    expect((await off.inspect(id)).labels[DISK_LABEL]).toBeUndefined()
    await off.remove(id)
  })

  it('reads BERTH_LOCAL_UNSANDBOXED as true or false only', () => {
    expect(configFromEnv({}).localUnsandboxed).toBe(false)
    expect(configFromEnv({ BERTH_LOCAL_UNSANDBOXED: 'true' }).localUnsandboxed).toBe(true)
    expect(() => configFromEnv({ BERTH_LOCAL_UNSANDBOXED: 'yes' })).toThrow(/BERTH_LOCAL_UNSANDBOXED/)
  })
})
