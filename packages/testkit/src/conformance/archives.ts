/** Conformance: put/get archive round trips and missing archive paths. */
import { randomBytes } from 'node:crypto'
import { expect, it } from 'vitest'
import { expectContainerFailure, type Suite } from './suite.js'
import { packTar, readTar } from '../tar.js'

/** Registers the cases of this concern in the current `describe` block. */
export function archiveCases(s: Suite): void {
  const { sh } = s
  it('round-trips a tar with binary content and nested paths', async () => {
    const binary = randomBytes(200 * 1024)
    const tar = await packTar([
      { name: 'tree/', type: 'directory' },
      { name: 'tree/deeper/', type: 'directory' },
      { name: 'tree/deeper/blob.bin', content: binary },
      { name: 'tree/readme.txt', content: 'hello tar\n' },
    ])
    await s.rt.putArchive(s.shared, '/workspace', tar)

    // Visible to commands, byte for byte.
    const sum = await sh(s.shared, 'sha256sum tree/deeper/blob.bin | cut -d" " -f1')
    const { createHash } = await import('node:crypto')
    expect(sum.stdout.trim()).toBe(createHash('sha256').update(binary).digest('hex'))

    // A directory comes back with itself as the top entry, directories named `dir/`.
    const entries = await readTar(await s.rt.getArchive(s.shared, '/workspace/tree'))
    const byName = new Map(entries.map((e) => [e.name, e]))
    expect([...byName.keys()].sort()).toEqual(
      ['tree/', 'tree/deeper/', 'tree/deeper/blob.bin', 'tree/readme.txt'].sort(),
    )
    expect(byName.get('tree/')?.type).toBe('directory')
    expect(byName.get('tree/deeper/blob.bin')?.content.equals(binary)).toBe(true)
    expect(byName.get('tree/readme.txt')?.content.toString()).toBe('hello tar\n')

    // A file comes back as a single entry named by its base name; a web stream body works too.
    const single = await readTar(await s.rt.getArchive(s.shared, '/workspace/tree/deeper/blob.bin'))
    expect(single.map((e) => e.name)).toEqual(['blob.bin'])
    expect(single[0]?.content.equals(binary)).toBe(true)

    const again = await packTar([{ name: 'streamed.txt', content: 'via stream' }])
    await s.rt.putArchive(
      s.shared,
      '/workspace/tree',
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(again.subarray(0, 700))
          c.enqueue(again.subarray(700))
          c.close()
        },
      }),
    )
    expect((await sh(s.shared, 'cat tree/streamed.txt')).stdout).toBe('via stream')
  })

  it('reports a missing archive path as CONTAINER_FAILED not_found', async () => {
    await expectContainerFailure(s.rt.getArchive(s.shared, '/workspace/does-not-exist'), 'not_found')
    const tar = await packTar([{ name: 'x.txt', content: 'x' }])
    await expectContainerFailure(s.rt.putArchive(s.shared, '/no/such/dir', tar), 'not_found')
  })
}
