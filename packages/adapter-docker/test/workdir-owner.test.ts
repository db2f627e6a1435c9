/**
 * A container for an unprivileged agent user gets its working directory: from the image
 * when the image says it already belongs to that user (`berth.workdir-owner`, no exec at
 * start), else by a `chown` exec as root. Either way the user can write there.
 */
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { IDLE_COMMAND, collectExec } from '@berth/core'
import { readEngine } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
const raw = new Docker({ socketPath: engine.socketPath })
const rt = dockerRuntime({ socketPath: engine.socketPath })
const made: string[] = []
afterAll(async () => {
  for (const id of made) await rt.remove(id).catch(() => {})
})

/** Start a container as `user` in /workspace; the execs the engine saw at start, and whether the user can write there. */
async function startAs(user: string, mounts?: { type: 'volume'; source: string; target: string }[]) {
  const since = Math.floor(Date.now() / 1000) - 1
  const { id } = await rt.create({
    image: engine.image,
    cmd: [...IDLE_COMMAND],
    user,
    workingDir: '/workspace',
    network: 'none',
    labels: { 'berth.test': 'workdir-owner' },
    ...(mounts && { mounts }),
  })
  made.push(id)
  await rt.start(id)
  const until = Math.floor(Date.now() / 1000) + 1
  const events = (await raw.getEvents({
    since,
    until,
    filters: JSON.stringify({ container: [id], event: ['exec_create'] }),
  })) as unknown as NodeJS.ReadableStream
  let text = ''
  for await (const chunk of events) text += chunk.toString()
  const execs = text
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { Action: string }).Action)
  const write = await collectExec(
    await rt.exec(id, { cmd: ['sh', '-c', 'touch /workspace/x && stat -c %u:%g /workspace'] }),
  )
  return { id, execs, write }
}

describe('the working directory of an unprivileged container', () => {
  it('the test image says /workspace is 1000:1000 already', async () => {
    const info = (await raw.getImage(engine.image).inspect()) as { Config: { Labels: Record<string, string> } }
    expect(info.Config.Labels['berth.workdir-owner']).toBe('1000:1000@/workspace')
  })

  it('the image owner: no chown exec at start, and the user writes there', async () => {
    const { execs, write } = await startAs('1000:1000')
    expect(execs.filter((a) => a.includes('chown'))).toEqual([])
    expect(write.exitCode, write.stderr).toBe(0)
    expect(write.stdout.trim()).toBe('1000:1000')
  })

  it('another user: chowned by an exec at start, and that user writes there', async () => {
    const { execs, write } = await startAs('1001:1001')
    expect(execs.filter((a) => a.includes('chown 1001:1001 /workspace'))).toHaveLength(1)
    expect(write.exitCode, write.stderr).toBe(0)
    expect(write.stdout.trim()).toBe('1001:1001')
  })

  it('a volume mounted at the working directory is chowned whatever the image says', async () => {
    const volume = `berth-test-owner-${process.pid}`
    try {
      const { id, execs, write } = await startAs('1000:1000', [
        { type: 'volume', source: volume, target: '/workspace' },
      ])
      expect(execs.filter((a) => a.includes('chown 1000:1000 /workspace'))).toHaveLength(1)
      expect(write.exitCode, write.stderr).toBe(0)
      await rt.remove(id)
    } finally {
      await raw
        .getVolume(volume)
        .remove()
        .catch(() => {})
    }
  })
})
