/**
 * The streaming tar rewriter and multipart reader behind workspace files, against
 * archives written by tar-stream and bodies written by undici's FormData.
 */
import { randomBytes } from 'node:crypto'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import { packTar, readTar } from '@berth/testkit'
import { repackTar } from '../src/internal/tar-repack.js'
import { MultipartError, readMultipart } from '../src/internal/multipart.js'
import { BLOCK_SIZES, bytesOf, validName } from './upload-arbitraries.js'

/** Bytes as a stream of chunks of `size` (1: every byte boundary is a chunk boundary). */
async function* chunks(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size)
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = []
  for await (const c of it) parts.push(c)
  return new Uint8Array(Buffer.concat(parts))
}

describe('repackTar', () => {
  it('renames entries, long and non-ASCII names too, and passes data through byte for byte', async () => {
    const long = `b/${'x'.repeat(150)}/${'y'.repeat(90)}.bin`
    const blob = randomBytes(70_000)
    const tar = await packTar([
      { name: 'b/', type: 'directory' },
      { name: 'b/plain.txt', content: 'hello' },
      { name: long, content: blob },
      { name: 'b/ünï.txt', content: 'ü' },
      { name: 'elsewhere.txt', content: 'dropped' },
    ])
    for (const size of [1, 511, 4096, tar.length]) {
      const renamed = await collect(
        repackTar([
          {
            archive: chunks(tar, size),
            rename: (name) => (name === 'b/' || name.startsWith('b/') ? `deep/er/${name}` : null),
          },
        ]),
      )
      const entries = await readTar(renamed)
      expect(entries.map((e) => e.name)).toEqual([
        'deep/er/b/',
        'deep/er/b/plain.txt',
        `deep/er/${long}`,
        'deep/er/b/ünï.txt',
      ])
      expect(entries[1]!.content.toString()).toBe('hello')
      expect(Buffer.compare(entries[2]!.content, blob)).toBe(0)
      expect(entries[3]!.content.toString()).toBe('ü')
    }
  })

  it('joins archives into one', async () => {
    const a = await packTar([{ name: 'a.txt', content: 'A' }])
    const b = await packTar([{ name: 'b.txt', content: 'B' }])
    const joined = await collect(
      repackTar([
        { archive: chunks(a, 100), rename: (n) => `one/${n}` },
        { archive: chunks(b, 100), rename: (n) => `two/${n}` },
      ]),
    )
    expect((await readTar(joined)).map((e) => [e.name, e.content.toString()])).toEqual([
      ['one/a.txt', 'A'],
      ['two/b.txt', 'B'],
    ])
  })

  it('a consumer that stops early stops reading the archive and asks for no further one', async () => {
    const big = await packTar([{ name: 'a.bin', content: randomBytes(300_000) }])
    let returned = false
    let asked = 0
    const archive = async function* () {
      try {
        yield* chunks(big, 4096)
      } finally {
        returned = true
      }
    }
    const sources = async function* () {
      for (const name of ['one', 'two']) {
        asked++
        yield { archive: archive(), rename: (n: string) => `${name}/${n}` }
      }
    }
    for await (const _ of repackTar(sources())) break
    await vi.waitFor(() => expect(returned).toBe(true))
    expect(asked).toBe(1)
  })

  it('refuses a corrupt header', async () => {
    const tar = await packTar([{ name: 'a.txt', content: 'A' }])
    tar[10] = 0x41
    await expect(collect(repackTar([{ archive: chunks(tar, 512), rename: (n) => n }]))).rejects.toThrow(
      /Invalid tar header/,
    )
  })
})

describe('readMultipart', () => {
  async function encode(form: FormData): Promise<{ body: Uint8Array; type: string }> {
    const res = new Response(form)
    return { body: new Uint8Array(await res.arrayBuffer()), type: res.headers.get('content-type')! }
  }

  it('streams fields and files, whatever the chunking, delimiter look-alikes included', async () => {
    const form = new FormData()
    form.append('path', 'a/b')
    const boundaryLike = Buffer.concat([
      randomBytes(3000),
      Buffer.from('\r\n--'),
      randomBytes(10),
      Buffer.from('\r\n\r\n--x--\r\n'),
    ])
    form.append('files', new Blob([boundaryLike]), 'one "quoted".bin')
    form.append('files', new Blob([]), 'empty')
    form.append('files', new Blob(['ü']), 'ünï.txt')
    const { body, type } = await encode(form)
    for (const size of [1, 7, 1000, body.length]) {
      const got: [string, string | null, Buffer][] = []
      for await (const part of readMultipart(chunks(body, size), type)!) {
        got.push([part.name, part.filename, Buffer.from(await collect(part.body))])
      }
      expect(got.map(([n, f]) => [n, f])).toEqual([
        ['path', null],
        ['files', 'one "quoted".bin'],
        ['files', 'empty'],
        ['files', 'ünï.txt'],
      ])
      expect(got[0]![2].toString()).toBe('a/b')
      expect(Buffer.compare(got[1]![2], boundaryLike)).toBe(0)
      expect(got[2]![2].length).toBe(0)
      expect(got[3]![2].toString()).toBe('ü')
    }
  })

  it('skips unread parts and refuses truncated bodies', async () => {
    const form = new FormData()
    form.append('files', new Blob([randomBytes(10_000)]), 'skipped')
    form.append('path', 'after')
    const { body, type } = await encode(form)
    const seen: string[] = []
    for await (const part of readMultipart(chunks(body, 333), type)!) {
      seen.push(part.filename === null ? Buffer.from(await collect(part.body)).toString() : part.filename)
    }
    expect(seen).toEqual(['skipped', 'after'])
    const cut = async () => {
      for await (const part of readMultipart(chunks(body.subarray(0, 5000), 333), type)!) await collect(part.body)
    }
    await expect(cut()).rejects.toBeInstanceOf(MultipartError)
  })

  it('refuses a part without a Content-Disposition: form-data header naming its field', async () => {
    const read = async (parts: string[]) => {
      const text = `${parts.map((p) => `--b\r\n${p}\r\n`).join('')}--b--\r\n`
      const names: string[] = []
      for await (const part of readMultipart(
        chunks(new TextEncoder().encode(text), 7),
        'multipart/form-data; boundary=b',
      )!) {
        await collect(part.body)
        names.push(part.name)
      }
      return names
    }
    const good = 'Content-Disposition: form-data; name="path"\r\n\r\nx'
    expect(await read([good])).toEqual(['path'])
    for (const bad of [
      'Content-Type: text/plain\r\n\r\nno disposition',
      'Content-Disposition: attachment; name="path"\r\n\r\nnot form-data',
      'Content-Disposition: form-data\r\n\r\nno name',
    ]) {
      await expect(read([good, bad, good])).rejects.toThrow(MultipartError)
    }
  })

  it('reads only multipart/form-data with a boundary', () => {
    const none = chunks(new Uint8Array(0), 1)
    expect(readMultipart(none, 'multipart/form-data; boundary="a b"')).not.toBeNull()
    expect(readMultipart(none, 'multipart/form-data')).toBeNull()
    expect(readMultipart(none, 'application/x-www-form-urlencoded; boundary=x')).toBeNull()
    expect(readMultipart(none, 'application/json; boundary=x')).toBeNull()
    expect(readMultipart(none, null)).toBeNull()
  })

  it('passes the failure of the source through, and calls a broken body malformed', async () => {
    const form = new FormData()
    form.append('files', new Blob([randomBytes(10_000)]), 'a.bin')
    const { body, type } = await encode(form)
    const failing = async function* () {
      yield body.subarray(0, 3000)
      throw new RangeError('the source broke')
    }
    const read = async (source: AsyncIterable<Uint8Array>) => {
      for await (const part of readMultipart(source, type)!) await collect(part.body)
    }
    await expect(read(failing())).rejects.toThrow(RangeError)
    const garbage = async function* () {
      yield new TextEncoder().encode('no boundary anywhere in here')
    }
    await expect(read(garbage())).rejects.toBeInstanceOf(MultipartError)
  })
})

describe('properties', () => {
  const chunking = fc.oneof(fc.constantFrom(1, 511, 512, 513, 4096), fc.integer({ min: 1, max: 70_000 }))
  const entries = fc.uniqueArray(
    fc.record({ dirs: fc.array(validName, { maxLength: 3 }), name: validName, size: BLOCK_SIZES, seed: fc.integer() }),
    { minLength: 1, maxLength: 5, selector: (e) => [...e.dirs, e.name].join('/') },
  )

  it('repackTar moves every entry under a new prefix, names of any length and bytes intact, however the archive is chunked', async () => {
    await fc.assert(
      fc.asyncProperty(entries, validName, chunking, async (files, prefix, size) => {
        const input = files.map((f) => ({
          name: ['src', ...f.dirs, f.name].join('/'),
          content: bytesOf(f.size, f.seed),
        }))
        const tar = await packTar(input)
        const out = await readTar(
          await collect(
            repackTar([{ archive: chunks(tar, size), rename: (n) => `${prefix}/${n.slice('src/'.length)}` }]),
          ),
        )
        expect(out.map((e) => [e.name, e.content.length])).toEqual(
          files.map((f) => [[prefix, ...f.dirs, f.name].join('/'), f.size]),
        )
        out.forEach((e, i) => {
          expect(Buffer.compare(e.content, input[i]!.content)).toBe(0)
        })
      }),
      { numRuns: 80, seed: 24 },
    )
  })

  it('readMultipart gives back every file part, name and bytes, however the body is chunked', async () => {
    const files = fc.array(fc.record({ name: validName, size: BLOCK_SIZES, seed: fc.integer() }), {
      minLength: 1,
      maxLength: 4,
    })
    await fc.assert(
      fc.asyncProperty(files, chunking, async (parts, size) => {
        const form = new FormData()
        for (const p of parts) form.append('files', new Blob([bytesOf(p.size, p.seed)]), p.name)
        const res = new Response(form)
        const body = new Uint8Array(await res.arrayBuffer())
        const got: [string | null, Uint8Array][] = []
        for await (const part of readMultipart(chunks(body, size), res.headers.get('content-type'))!)
          got.push([part.filename, await collect(part.body)])
        expect(got.map(([name, bytes]) => [name, bytes.length])).toEqual(parts.map((p) => [p.name, p.size]))
        got.forEach(([, bytes], i) => {
          expect(Buffer.compare(bytes, bytesOf(parts[i]!.size, parts[i]!.seed))).toBe(0)
        })
      }),
      { numRuns: 80, seed: 24 },
    )
  })
})
