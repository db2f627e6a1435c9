/** The console's download of one file: the first regular file of the tar the server sends. */
import { pack } from 'tar-stream'
import { describe, expect, it } from 'vitest'
import { firstFile } from '../src/ui/tar.js'

/** A tar archive of `entries`, as tar-stream writes it (PAX headers for long names). */
async function archive(entries: { name: string; type?: 'file' | 'directory'; body?: string }[]): Promise<Uint8Array> {
  const p = pack()
  for (const e of entries) {
    if (e.type === 'directory') p.entry({ name: e.name, type: 'directory' })
    else p.entry({ name: e.name }, e.body ?? '')
  }
  p.finalize()
  const chunks: Buffer[] = []
  for await (const chunk of p) chunks.push(chunk as Buffer)
  return new Uint8Array(Buffer.concat(chunks))
}

describe('firstFile', () => {
  it('skips directories and returns the first file by its base name, with its bytes', async () => {
    const tar = await archive([
      { name: 'notes', type: 'directory' },
      { name: 'notes/today.txt', body: 'first' },
      { name: 'notes/later.txt', body: 'second' },
    ])
    const file = firstFile(tar)
    expect(file?.name).toBe('today.txt')
    expect(new TextDecoder().decode(file?.data)).toBe('first')
  })

  it('reads a name longer than the ustar header holds (PAX)', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(140)}.md`
    const file = firstFile(await archive([{ name: long, body: 'x'.repeat(1000) }]))
    expect(file?.name).toBe(`${'f'.repeat(140)}.md`)
    expect(file?.data.length).toBe(1000)
  })

  it('reads bytes that start inside a larger buffer', async () => {
    const tar = await archive([{ name: 'a.txt', body: 'offset' }])
    const padded = new Uint8Array(tar.length + 7)
    padded.set(tar, 7)
    expect(new TextDecoder().decode(firstFile(padded.subarray(7))?.data)).toBe('offset')
  })

  it('is null for an archive without a regular file', async () => {
    expect(firstFile(await archive([{ name: 'only-a-dir', type: 'directory' }]))).toBeNull()
    expect(firstFile(new Uint8Array(1024))).toBeNull()
  })
})
