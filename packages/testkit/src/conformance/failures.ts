/** Conformance: an engine that is not there, and a container killed from outside mid-exec. */
import { IDLE_COMMAND, type ExecProcess } from '@berth/core'
import { expect, it } from 'vitest'
import { expectContainerFailure, text, type Suite } from './suite.js'

/** Registers the cases of this concern in the current `describe` block. */
export function failureCases(s: Suite): void {
  const { make, opts } = s
  it('fails with CONTAINER_FAILED when the engine is not there', async () => {
    const down = await opts.makeUnreachable()
    const t0 = Date.now()
    if (down.ensureImage) await expectContainerFailure(down.ensureImage(opts.image), 'unreachable')
    await expectContainerFailure(down.ping(), 'unreachable')
    await expectContainerFailure(down.create({ image: opts.image, cmd: [...IDLE_COMMAND] }), 'unreachable')
    await expectContainerFailure(down.list(), 'unreachable')
    await expectContainerFailure(down.exec('whatever', { cmd: ['true'] }), 'unreachable')
    expect(Date.now() - t0).toBeLessThan(10_000)
  })

  it('rejects a running exec with CONTAINER_FAILED, promptly, when the container is killed from outside', async () => {
    const id = await make()
    const proc: ExecProcess = await s.rt.exec(id, { cmd: ['sh', '-c', 'echo started; sleep 120; echo never'] })
    const out: string[] = []
    const reading = (async () => {
      for await (const c of proc.stdout) out.push(text([c]))
    })()
    while (!out.join('').includes('started')) await new Promise((r) => setTimeout(r, 20))
    const t0 = Date.now()
    await opts.killFromOutside(id)
    const details = await expectContainerFailure(proc.exit, 'died')
    const took = Date.now() - t0
    expect(took).toBeLessThan(opts.deathDetectionMs ?? 10_000)
    expect(details.id).toBe(id)
    await reading // the output streams end too
    expect(out.join('')).not.toContain('never')
  })
}
