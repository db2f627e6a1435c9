/** Conformance: capabilities, create/start/inspect, list by label, stats, stop and remove. */
import { expect, it } from 'vitest'
import { expectContainerFailure, MiB, type Suite } from './suite.js'

/** Registers the cases of this concern in the current `describe` block. */
export function lifecycleCases(s: Suite): void {
  const { make, sh, run, runLabels, opts } = s
  it('declares the capabilities the adapter must have', () => {
    expect({ ...s.rt.capabilities }).toEqual(opts.capabilities)
  })

  it('creates and starts a container; inspect reports it running with berth labels', async () => {
    const info = await s.rt.inspect(s.shared)
    expect(info.id).toBe(s.shared)
    expect(info.state).toBe('running')
    expect(info.running).toBe(true)
    expect(info.exitCode).toBeNull()
    expect(info.labels).toMatchObject({ 'berth.managed': 'true', 'berth.test.run': run })
    expect(Date.parse(info.createdAt)).toBeGreaterThan(Date.now() - 10 * 60_000)
    expect(info.startedAt).not.toBeNull()
  })

  it('lists its containers by label', async () => {
    const a = await make({ labels: { 'berth.pool': `a-${run}`, 'berth.owner': 'usr_a' } }, false)
    const b = await make({ labels: { 'berth.pool': `b-${run}`, 'berth.owner': 'usr_b' } }, false)
    const onlyA = await s.rt.list({ labels: { 'berth.pool': `a-${run}` } })
    expect(onlyA.map((c) => c.id)).toEqual([a])
    expect(onlyA[0]?.labels).toMatchObject({ 'berth.managed': 'true', 'berth.owner': 'usr_a' })
    expect(onlyA[0]?.state).toBe('created')
    const both = await s.rt.list({ labels: { ...runLabels, 'berth.owner': true } })
    expect(both.map((c) => c.id).sort()).toEqual([a, b].sort())
    const all = await s.rt.list({ labels: runLabels })
    expect(all.map((c) => c.id)).toEqual(expect.arrayContaining([s.shared, a, b]))
    const running = await s.rt.list({ labels: runLabels, all: false })
    expect(running.map((c) => c.id)).toContain(s.shared)
    expect(running.map((c) => c.id)).not.toContain(a)
  })

  it('reports memory usage in stats', async () => {
    const stats = await s.rt.stats(s.shared)
    expect(stats.memoryBytes).toBeGreaterThan(0)
    expect(stats.memoryBytes).toBeLessThan(2 * 1024 * MiB)
  })

  it('stops a container promptly (SIGTERM reaches the idle process) and inspect shows it exited', async () => {
    const id = await make()
    const t0 = Date.now()
    await s.rt.stop(id, { timeoutSeconds: 8 })
    expect(Date.now() - t0).toBeLessThan(6000)
    const info = await s.rt.inspect(id)
    expect(info.state).toBe('exited')
    expect(info.running).toBe(false)
    expect(typeof info.exitCode).toBe('number')
    await s.rt.stop(id) // stopping a stopped container resolves
    await expectContainerFailure(sh(id, 'true'))
  })

  it('removes idempotently; an absent container is CONTAINER_FAILED not_found', async () => {
    const id = await make()
    await s.rt.remove(id)
    await s.rt.remove(id)
    await s.rt.remove(`nonexistent-${run}`)
    await expectContainerFailure(s.rt.inspect(id), 'not_found')
    expect((await s.rt.list({ labels: runLabels })).map((c) => c.id)).not.toContain(id)
  })
}
