import { describe, expect, it } from 'vitest'
import { createRedactor, REDACTED } from '../src/redact.js'

describe('redaction', () => {
  it('replaces every value in text and deep in JSON-like values, longest first', () => {
    const r = createRedactor(['abc', 'abcdef', ''])
    expect(r.text('x abcdef y abc')).toBe(`x ${REDACTED} y ${REDACTED}`)
    expect(r.value({ a: ['abc'], abc: { n: 1, s: 'zabcz' } })).toEqual({ a: [REDACTED], [REDACTED]: { n: 1, s: `z${REDACTED}z` } })
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
