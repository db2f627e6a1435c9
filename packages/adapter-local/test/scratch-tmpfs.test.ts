/**
 * The local runtime's `/tmp` and `/root` under bubblewrap are tmpfs of `limits.tmpBytes`
 * (the server runs as root here): a 2 GiB `fallocate` in either fails at the limit, and
 * removing the container unmounts them. (The workspace's disk: `disk-limits.test.ts`.)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { IDLE_COMMAND, collectExec } from '@berth/core'
import { localRuntime } from '../src/index.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-tmpfs-'))
const rt = localRuntime({ baseDir })
afterAll(() => rmSync(baseDir, { recursive: true, force: true }))

const mountsUnder = () =>
  readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.includes(baseDir))

it('a 2 GiB fallocate in /tmp or /root fails at 32 MiB; remove unmounts them', async () => {
  expect(rt.sandbox).toBe('bwrap')
  const { id } = await rt.create({
    image: 'local',
    cmd: [...IDLE_COMMAND],
    workingDir: '/workspace',
    limits: { tmpBytes: 32 * 1024 * 1024 },
  })
  try {
    await rt.start(id)
    for (const dir of ['/tmp', '/root']) {
      const r = await collectExec(
        await rt.exec(id, { cmd: ['sh', '-c', `fallocate -l 2G ${dir}/big; e=$?; df -k ${dir} | tail -1; exit $e`] }),
      )
      expect(r.exitCode, dir).not.toBe(0)
      expect(r.stderr, dir).toMatch(/no space left on device/i)
      expect(Number(r.stdout.trim().split(/\s+/)[1]), dir).toBeLessThanOrEqual(32 * 1024)
    }
    expect(mountsUnder()).toHaveLength(2)
  } finally {
    await rt.remove(id)
  }
  expect(mountsUnder()).toEqual([])
})
