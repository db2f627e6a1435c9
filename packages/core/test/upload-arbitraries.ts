/** fast-check generators of upload file names and contents, shared by the property tests. */
import fc from 'fast-check'
import { isPlainName } from '../src/workspaces/workspace-paths.js'

/** Characters worth meeting in a name: quotes, separators of headers, spaces, non-Latin. */
const SPECIAL = [
  ' ',
  '"',
  "'",
  ';',
  '=',
  ',',
  '-',
  '_',
  '.',
  '~',
  '#',
  '(',
  ')',
  '&',
  '+',
  'ü',
  'é',
  'ß',
  'ñ',
  '中',
  '文',
  'Ω',
  '😀',
  '👩‍💻',
]
const nameChar = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...'abcXYZ0189'.split('')) },
  { weight: 2, arbitrary: fc.constantFrom(...SPECIAL) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }) },
)

/** What the upload route refuses: a "/", control or bidirectional formatting characters, "." and "..", over 255 bytes. */
const refused = (name: string) => !isPlainName(name)

/**
 * A file name the upload stores: short or long (around tar's 100-byte name field and up to
 * the 255-byte limit), unicode and spaces included. Left out: "%22", "%0D" and "%0A", which
 * the HTML form encoding uses for `"`, CR and LF, so such a name cannot be told from those;
 * and backslashes, which the form encoding leaves as they are but busboy reads as RFC 7230
 * quoted-pairs (`\\` is one backslash, `\"` a quote), as the hand-written parser did before.
 */
export const validName: fc.Arbitrary<string> = fc
  .oneof(fc.array(nameChar, { minLength: 1, maxLength: 12 }), fc.array(nameChar, { minLength: 60, maxLength: 140 }))
  .map((chars) => {
    let name = chars.join('')
    while (Buffer.byteLength(name) > 255) name = [...name].slice(0, -1).join('')
    return name
  })
  .filter((name) => !refused(name) && !/%(22|0d|0a)/i.test(name) && !name.includes('\\'))

/** A name the upload refuses. */
export const invalidName: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '.',
    '..',
    '../escape',
    '../../../../tmp/escape',
    '/etc/passwd',
    'a/b',
    'tab\tname',
    'nul\u0000name',
    'bell\u0007',
    'del\u007f',
    // Shown as something they are not: "reportexe.pdf", an isolate, a C1 next line.
    'report\u202Efdp.exe',
    'a\u2066b\u2069',
    'c1\u0085name',
  ),
  fc
    .tuple(
      validName,
      fc.constantFrom(
        '/',
        '\u0001',
        '\u001b',
        '\r',
        '\n',
        '\u009b',
        '\u061c',
        '\u200e',
        '\u200f',
        '\u2028',
        '\u202a',
        '\u202e',
        '\u2067',
      ),
      validName,
    )
    .map(([a, bad, b]) => `${a}${bad}${b}`),
  fc.integer({ min: 256, max: 400 }).map((n) => 'x'.repeat(n)),
)

/** Sizes at the edges of tar blocks (512), multipart reads and stream chunks (16 and 64 KiB). */
export const BLOCK_SIZES: fc.Arbitrary<number> = fc.oneof(
  fc.constantFrom(0, 1, 511, 512, 513, 1023, 1024, 1025, 16_383, 16_384, 16_385, 65_535, 65_536, 65_537),
  fc.integer({ min: 0, max: 2048 }),
)

/** `size` bytes made from `seed` (fast even for MiBs, the same for the same seed). */
export function bytesOf(size: number, seed: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(size)
  let x = seed | 0 || 1
  for (let i = 0; i < size; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}
