import { describe, expect, it } from 'vitest'
import { createRedactor, REDACTED } from '../src/redact.js'

describe('redaction', () => {
  it('replaces every value in text and deep in JSON-like values, longest first', () => {
    const r = createRedactor(['abc', 'abcdef', ''])
    expect(r.text('x abcdef y abc')).toBe(`x ${REDACTED} y ${REDACTED}`)
    expect(r.value({ a: ['abc'], abc: { n: 1, s: 'zabcz' } })).toEqual({
      a: [REDACTED],
      [REDACTED]: { n: 1, s: `z${REDACTED}z` },
    })
  })

  it('never lets a secret through when it is split across stream chunks', () => {
    const secret = 'open sesame'
    const r = createRedactor([secret])
    for (let cut = 1; cut < secret.length; cut++) {
      const s = r.stream()
      const pieces = [s.push(`say ${secret.slice(0, cut)}`), s.push(`${secret.slice(cut)} now`), s.flush()]
      expect(pieces.join('')).toBe(`say ${REDACTED} now`)
      for (const p of pieces) expect(p).not.toContain('sesame')
    }
  })

  it('holds back only what could start a secret, and gives it back at flush', () => {
    const s = createRedactor(['abab']).stream()
    expect(s.push('xxab')).toBe('xx')
    expect(s.push('ab')).toBe(REDACTED)
    expect(s.push('a')).toBe('')
    expect(s.flush()).toBe('a')
  })

  it('is a no-op without secrets', () => {
    const s = createRedactor([]).stream()
    expect(s.push('hello')).toBe('hello')
    expect(s.flush()).toBe('')
  })
})

describe('redaction of encoded forms', () => {
  const secret = 'sk-live/Secret+Value 42?'
  const r = createRedactor([secret])
  const b64 = (s: string) => Buffer.from(s).toString('base64')

  it('replaces the base64 of a secret, standard and URL-safe, alone or inside a longer encoded text', () => {
    expect(r.text(`token ${b64(secret)} end`)).not.toContain(b64(secret).slice(0, 12))
    expect(r.text(Buffer.from(secret).toString('base64url'))).toContain(REDACTED)
    // A Basic header: the secret sits at every alignment after some user name.
    for (const user of ['u', 'us', 'usr', 'user:']) {
      const header = `Authorization: Basic ${b64(`${user}:${secret}`)}`
      const out = r.text(header)
      expect(out, user).toContain(REDACTED)
      // What is left cannot be decoded back to the secret.
      expect(Buffer.from(out.split(' ').pop()!.replace(REDACTED, ''), 'base64').toString('latin1')).not.toContain(
        'Secret',
      )
    }
  })

  it('replaces the URL-encoded and JSON-escaped forms', () => {
    expect(r.text(`https://x.test/?key=${encodeURIComponent(secret)}&a=1`)).toBe(`https://x.test/?key=${REDACTED}&a=1`)
    expect(r.text(`key=${new URLSearchParams({ k: secret }).toString().slice(2)}`)).toBe(`key=${REDACTED}`)
    const quoted = createRedactor(['pa"ss\\word'])
    expect(quoted.text(JSON.stringify({ p: 'pa"ss\\word' }))).toBe(`{"p":"${REDACTED}"}`)
  })

  it('leaves ordinary text alone', () => {
    expect(r.text('nothing secret here, just sk-live words')).toBe('nothing secret here, just sk-live words')
  })
})
