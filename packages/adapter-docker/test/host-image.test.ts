import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { IDLE_COMMAND, collectExec } from '@berth/core'
import { readEngine, readTar } from '@berth/testkit'
import { dockerRuntime, hostImageRecipe } from '../src/index.js'

const engine = readEngine('docker')
const raw = new Docker({ socketPath: engine.socketPath })
const rt = dockerRuntime({ socketPath: engine.socketPath })
const run = randomBytes(4).toString('hex')

/** A local port nothing listens on: a "registry" every pull fails against, without leaving the machine. */
async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

describe('hostImageRecipe', () => {
  const made: { containers: string[]; images: string[] } = { containers: [], images: [] }

  afterAll(async () => {
    for (const id of made.containers) await rt.remove(id)
    for (const ref of made.images)
      await raw
        .getImage(ref)
        .remove({ force: true })
        .catch(() => {})
  })

  it('describes the same host the same way (a stable hash), and packs node, bash, git, librt and their libraries', async () => {
    const recipe = hostImageRecipe()
    expect(hostImageRecipe().hash).toBe(recipe.hash)
    expect(recipe.hash).toMatch(/^[0-9a-f]{16}$/)
    expect(recipe.description).toContain(`node ${process.version}`)
    const names = new Set((await readTar(recipe.rootfs())).map((e) => e.name.replace(/\/$/, '')))
    for (const path of [
      'usr/local/bin/node',
      'bin/bash',
      'usr/bin/git',
      'etc/passwd',
      'tmp',
      'workspace',
      'home/node',
    ]) {
      expect(names.has(path), path).toBe(true)
    }
    expect([...names].some((n) => /(^|\/)librt\.so\.1$/.test(n))).toBe(true)
    expect([...names].some((n) => /(^|\/)libc\.so\.6$/.test(n))).toBe(true)
  })

  it("builds an image that runs the host's node, bash and git, when no registry has the image", async () => {
    const ref = `127.0.0.1:${await closedPort()}/berth-host-image-${run}:latest`
    made.images.push(ref)
    const recipe = hostImageRecipe()
    const report = await rt.ensureImage!(ref, { recipe })
    expect(report).toMatchObject({ ref, source: 'built', recipe: recipe.hash })
    const labels = ((await raw.getImage(ref).inspect()) as { Config: { Labels: Record<string, string> } }).Config.Labels
    expect(labels['berth.recipe']).toBe(recipe.hash)
    // The agent user's working directory is theirs already: no chown exec per container.
    expect(labels['berth.workdir-owner']).toBe('1000:1000@/workspace')

    const { id } = await rt.create({
      image: ref,
      cmd: [...IDLE_COMMAND],
      workingDir: '/workspace',
      labels: { 'berth.test.run': run },
    })
    made.containers.push(id)
    await rt.start(id)
    const r = await collectExec(
      await rt.exec(id, {
        cmd: [
          'bash',
          '-c',
          'node -v; git --version; echo "$PATH"; git init -q repo && echo git-ok; stat -c %a /tmp; id -u node; stat -c %u:%g /workspace',
        ],
      }),
    )
    expect(r.stderr).toBe('')
    expect(r.stdout.split('\n')).toEqual([
      process.version,
      expect.stringMatching(/^git version \d/),
      '/usr/local/bin:/usr/bin:/bin',
      'git-ok',
      '1777',
      '1000',
      '1000:1000',
      '',
    ])
  })
})
