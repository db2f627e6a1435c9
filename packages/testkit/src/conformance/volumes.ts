/** Conformance: named volumes and host bind mounts. */
import { join } from 'node:path'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { expect, it } from 'vitest'
import type { Suite } from './suite.js'

/** Registers the cases of this concern in the current `describe` block. */
export function volumeCases(s: Suite): void {
  const { make, sh, run, runLabels, opts } = s
  it('creates labelled volumes, lists them by label, mounts them writable and removes them idempotently', async () => {
    const volume = `berth-conformance-${run}`
    await s.rt.createVolume(volume, { labels: { ...runLabels, 'berth.workspace': 'ws_conformance' } })
    await s.rt.createVolume(volume, { labels: { ...runLabels, 'berth.workspace': 'ws_other' } }) // exists: unchanged
    try {
      const listed = await s.rt.listVolumes({ labels: runLabels })
      expect(listed.map((v) => v.name)).toEqual([volume])
      expect(listed[0]!.labels).toMatchObject({
        'berth.managed': 'true',
        'berth.workspace': 'ws_conformance',
        ...runLabels,
      })
      expect(await s.rt.listVolumes({ labels: { 'berth.test.run': `${run}-none` } })).toEqual([])
      const a = await make({ mounts: [{ type: 'volume', source: volume, target: '/workspace/vol' }] })
      expect((await sh(a, 'echo kept > vol/file && echo ok')).stdout.trim()).toBe('ok')
      await s.rt.remove(a)
      const b = await make({ mounts: [{ type: 'volume', source: volume, target: '/workspace/vol' }] })
      expect((await sh(b, 'cat vol/file')).stdout.trim()).toBe('kept')
      await s.rt.remove(b)
    } finally {
      await s.rt.removeVolume(volume)
    }
    expect(await s.rt.listVolumes({ labels: runLabels })).toEqual([])
    await s.rt.removeVolume(volume)
  })

  it('mounts host directories, read-only where asked (enforced when the runtime isolates)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-conformance-'))
    writeFileSync(join(dir, 'ro.txt'), 'from host\n')
    const rw = mkdtempSync(join(tmpdir(), 'berth-conformance-rw-'))
    try {
      const id = await make({
        mounts: [
          { type: 'bind', source: dir, target: '/workspace/ro', readOnly: true },
          { type: 'bind', source: rw, target: '/workspace/rw' },
        ],
      })
      const r = await sh(
        id,
        'cat ro/ro.txt; echo written > rw/out.txt && echo rw-ok; touch ro/new 2>/dev/null && echo ro-writable',
      )
      expect(r.stdout).toContain('from host')
      expect(r.stdout).toContain('rw-ok')
      expect(readFileSync(join(rw, 'out.txt'), 'utf8')).toBe('written\n')
      if (opts.capabilities.isolation) expect(r.stdout).not.toContain('ro-writable')
    } finally {
      rmSync(dir, { recursive: true, force: true })
      rmSync(rw, { recursive: true, force: true })
    }
  })
}
