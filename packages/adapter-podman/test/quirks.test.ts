import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { IDLE_COMMAND } from '@berth/core'
import { busyboxRecipe, packTar, readEngine, readTar } from '@berth/testkit'
import { slashDirectoryNames } from '../src/archive-names.js'
import { isQualifiedImage, localImageName } from '../src/image-names.js'
import { podmanRuntime } from '../src/index.js'

const engine = readEngine('podman')
const rt = podmanRuntime({ socketPath: engine.socketPath })
const created: string[] = []

afterAll(async () => {
  await Promise.all(created.map((id) => rt.remove(id)))
})

describe('podman image names', () => {
  it('knows qualified from short names', () => {
    expect(isQualifiedImage('localhost/berth-test:latest')).toBe(true)
    expect(isQualifiedImage('quay.io/podman/stable')).toBe(true)
    expect(isQualifiedImage('registry:5000/x')).toBe(true)
    expect(isQualifiedImage('berth-test:latest')).toBe(false)
    expect(isQualifiedImage('library/node:20')).toBe(false)
    expect(localImageName('berth-test')).toBe('localhost/berth-test:latest')
    expect(localImageName('berth-test:v1')).toBe('localhost/berth-test:v1')
  })

  it('creates from the short name of a locally imported image (stored as localhost/…)', async () => {
    const short = engine.image.replace(/^localhost\//, '')
    expect(short).not.toContain('localhost')
    const { id } = await rt.create({ image: short, cmd: [...IDLE_COMMAND] })
    created.push(id)
    const info = await rt.inspect(id)
    expect(info.image).toBe(engine.image)
  })

  it('ensureImage finds a short name under localhost/ and reports that name, with no pull and no build', async () => {
    const short = engine.image.replace(/^localhost\//, '')
    const recipe = busyboxRecipe('never-built', 'never')
    const stages: string[] = []
    const report = await rt.ensureImage!(short, { recipe, onProgress: (stage) => stages.push(stage) })
    expect(report).toMatchObject({ ref: engine.image, source: 'present' })
    expect(recipe.builds).toBe(0)
    expect(stages).toEqual([])
  })
})

describe('podman archives', () => {
  it('names directories like Docker (dir/) though the engine writes dir', async () => {
    // The raw engine answer, without the adapter: directories lack the trailing slash.
    const { id } = await rt.create({ image: engine.image, cmd: [...IDLE_COMMAND], workingDir: '/workspace' })
    created.push(id)
    await rt.start(id)
    await rt.putArchive(
      id,
      '/workspace',
      await packTar([
        { name: 'd/', type: 'directory' },
        { name: 'd/f', content: 'x' },
      ]),
    )
    const rawTar = await new Docker({ socketPath: engine.socketPath })
      .getContainer(id)
      .getArchive({ path: '/workspace/d' })
    const rawNames = (await readTar(rawTar as unknown as AsyncIterable<Uint8Array>)).map((e) => e.name)
    const viaAdapter = (await readTar(await rt.getArchive(id, '/workspace/d'))).map((e) => e.name)
    expect(viaAdapter.sort()).toEqual(['d/', 'd/f'])
    // If Podman ever names them like Docker, the transform stays harmless; record what it does now.
    expect(rawNames.every((n) => n === 'd' || n === 'd/' || n === 'd/f')).toBe(true)
  })

  it('slashDirectoryNames keeps file content and order', async () => {
    const tar = await packTar([
      { name: 'a', type: 'directory' },
      { name: 'a/b.bin', content: new Uint8Array([0, 1, 2, 255]) },
    ])
    async function* once() {
      yield tar
    }
    const entries = await readTar(slashDirectoryNames(once()))
    expect(entries.map((e) => e.name)).toEqual(['a/', 'a/b.bin'])
    expect([...entries[1]!.content]).toEqual([0, 1, 2, 255])
  })
})
