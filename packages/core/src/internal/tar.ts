/**
 * The little of tar that serving workspace files needs: read the archives a container
 * engine produces (ustar, GNU and PAX headers), rename their entries, and join several
 * into one archive, all streaming, entry data passed through untouched.
 */
import { ByteReader, concat } from './byte-reader.js'

const BLOCK = 512
const enc = new TextEncoder()
const dec = new TextDecoder('utf-8', { fatal: false })

/** Where a header field is (offset, length). */
const F = {
  name: [0, 100],
  mode: [100, 8],
  size: [124, 12],
  mtime: [136, 12],
  chksum: [148, 8],
  type: [156, 1],
  linkname: [157, 100],
  magic: [257, 6],
  prefix: [345, 155],
} as const

function field(h: Uint8Array, [at, len]: readonly [number, number]): Uint8Array {
  const raw = h.subarray(at, at + len)
  const nul = raw.indexOf(0)
  return nul < 0 ? raw : raw.subarray(0, nul)
}

function text(h: Uint8Array, f: readonly [number, number]): string {
  return dec.decode(field(h, f))
}

/** A numeric field: octal text, or GNU base-256 when the high bit is set. */
function number(h: Uint8Array, [at, len]: readonly [number, number]): number {
  const raw = h.subarray(at, at + len)
  if (raw[0]! & 0x80) {
    let n = raw[0]! & 0x7f
    for (let i = 1; i < raw.length; i++) n = n * 256 + raw[i]!
    return n
  }
  const s = dec.decode(raw).replace(/\0.*$/s, '').trim()
  return s ? parseInt(s, 8) : 0
}

function checksum(h: Uint8Array): number {
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i]!
  return sum
}

function writeOctal(h: Uint8Array, [at, len]: readonly [number, number], n: number): void {
  const s = n.toString(8).padStart(len - 1, '0')
  h.set(enc.encode(s.slice(-(len - 1))), at)
  h[at + len - 1] = 0
}

function setText(h: Uint8Array, [at, len]: readonly [number, number], value: Uint8Array): void {
  h.fill(0, at, at + len)
  h.set(value.subarray(0, len), at)
}

function seal(h: Uint8Array): Uint8Array {
  const sum = checksum(h)
  const s = sum.toString(8).padStart(6, '0')
  h.set(enc.encode(s), 148)
  h[154] = 0
  h[155] = 32
  return h
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK

/** PAX records `len key=value\n` → map (values as text). */
function parsePax(data: Uint8Array): Map<string, string> {
  const out = new Map<string, string>()
  let at = 0
  while (at < data.length) {
    const space = data.indexOf(32, at)
    if (space < 0) break
    const len = Number(dec.decode(data.subarray(at, space)))
    if (!Number.isInteger(len) || len <= 0 || at + len > data.length) break
    const record = dec.decode(data.subarray(space + 1, at + len - 1))
    const eq = record.indexOf('=')
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1))
    at += len
  }
  return out
}

function paxRecord(key: string, value: string): Uint8Array {
  const body = ` ${key}=${value}\n`
  const bodyLen = enc.encode(body).length
  let len = bodyLen + String(bodyLen).length
  if (String(len).length !== String(len - bodyLen).length) len = bodyLen + String(len).length
  return enc.encode(`${len}${body}`)
}

/** A PAX extended header entry (type `x`) carrying `records`, padded. */
function paxEntry(records: Map<string, string>, mtime: number): Uint8Array {
  const data = concat([...records].map(([k, v]) => paxRecord(k, v)))
  const h = new Uint8Array(BLOCK)
  setText(h, F.name, enc.encode('PaxHeader'))
  writeOctal(h, F.mode, 0o644)
  writeOctal(h, [108, 8], 0)
  writeOctal(h, [116, 8], 0)
  writeOctal(h, F.size, data.length)
  writeOctal(h, F.mtime, mtime)
  h[156] = 'x'.charCodeAt(0)
  h.set(enc.encode('ustar\u0000'), 257)
  h.set(enc.encode('00'), 263)
  return concat([seal(h), data, new Uint8Array(padding(data.length))])
}

/** True for a name that fits the plain 100-byte field as ASCII. */
const fitsName = (name: string) => /^[\x20-\x7e]{1,100}$/.test(name)

/** One entry as read: its effective name and link, its raw header, its data size. */
interface RawEntry {
  name: string
  linkname: string
  type: string
  header: Uint8Array
  /** PAX records that applied to it (besides `path`/`linkpath`, kept on rewrite). */
  pax: Map<string, string>
  size: number
}

/**
 * Rename every entry of a tar stream: `rename(name, type)` returns the new name, or
 * `null` to leave the entry out. Hard links are renamed by the same function. Headers
 * are kept byte for byte except the names (PAX `path` when a name does not fit), data
 * passes through; the end-of-archive blocks are not written, so outputs can be joined.
 *
 * @example
 * ```ts
 * const renamed = renameTarEntries(tar, (name) => name.replace(/^b(\/|$)/, 'a/b$1'))
 * ```
 */
export async function* renameTarEntries(
  source: AsyncIterable<Uint8Array>,
  rename: (name: string, type: string) => string | null,
): AsyncGenerator<Uint8Array> {
  const reader = new ByteReader(source)
  try {
    let pax = new Map<string, string>()
    let longName: string | null = null
    let longLink: string | null = null
    for (;;) {
      const header = await reader.read(BLOCK)
      if (!header || header.every((b) => b === 0)) return
      if (checksum(header) !== number(header, F.chksum)) throw new Error('tar: bad header checksum')
      const type = String.fromCharCode(header[156] || 48)
      const size = pax.has('size') && type !== 'x' ? Number(pax.get('size')) : number(header, F.size)
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        const data = await reader.read(size + padding(size))
        const body = (data ?? new Uint8Array(0)).subarray(0, size)
        if (type === 'x') pax = new Map([...pax, ...parsePax(body)])
        else if (type === 'L') longName = dec.decode(field(body, [0, body.length]))
        else if (type === 'K') longLink = dec.decode(field(body, [0, body.length]))
        continue
      }
      const posix = text(header, F.magic) === 'ustar'
      const prefix = posix ? text(header, F.prefix) : ''
      const entry: RawEntry = {
        name: pax.get('path') ?? longName ?? (prefix ? `${prefix}/${text(header, F.name)}` : text(header, F.name)),
        linkname: pax.get('linkpath') ?? longLink ?? text(header, F.linkname),
        type,
        header,
        pax,
        size,
      }
      pax = new Map()
      longName = longLink = null
      const next = rename(entry.name, entry.type)
      const data = reader.take(size + padding(size))
      if (next === null) {
        for await (const _ of data);
        continue
      }
      yield* rewrite(entry, next, type === '1' ? (rename(entry.linkname, '0') ?? entry.linkname) : entry.linkname)
      yield* data
    }
  } finally {
    await reader.cancel()
  }
}

function* rewrite(entry: RawEntry, name: string, linkname: string): Generator<Uint8Array> {
  const h = entry.header.slice()
  const records = new Map(entry.pax)
  records.delete('path')
  records.delete('linkpath')
  if (fitsName(name)) setText(h, F.name, enc.encode(name))
  else {
    records.set('path', name)
    setText(h, F.name, enc.encode(name.replace(/[^\x20-\x7e]/g, '_').slice(-100)))
  }
  if (text(h, F.magic) === 'ustar') h.fill(0, F.prefix[0], F.prefix[0] + F.prefix[1])
  if (linkname === '' || fitsName(linkname)) setText(h, F.linkname, enc.encode(linkname))
  else {
    records.set('linkpath', linkname)
    setText(h, F.linkname, enc.encode(linkname.replace(/[^\x20-\x7e]/g, '_').slice(-100)))
  }
  if (records.size) yield paxEntry(records, number(h, F.mtime))
  yield seal(h)
}

/** The two zero blocks that end an archive. */
export const TAR_END = new Uint8Array(BLOCK * 2)
