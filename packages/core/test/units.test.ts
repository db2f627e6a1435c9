import { randomBytes } from 'node:crypto'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { createAesGcmCipher, manualClock, newId, tokenBucket } from '@berth/core'
import { modelAllowed } from '@berth/contract'

describe('AES-256-GCM cipher', () => {
  const cipher = createAesGcmCipher(randomBytes(32))
  it('round-trips and never repeats a ciphertext', () => {
    const a = cipher.encrypt('sk-ant-123 ✓')
    expect(cipher.decrypt(a)).toBe('sk-ant-123 ✓')
    expect(cipher.encrypt('sk-ant-123 ✓')).not.toBe(a)
    expect(a).not.toContain('sk-ant')
  })
  it('refuses tampered ciphertext and a different key', () => {
    const c = cipher.encrypt('value')
    const parts = c.split(':')
    const body = Buffer.from(parts[4]!, 'base64url')
    body[0]! ^= 1
    parts[4] = body.toString('base64url')
    expect(() => cipher.decrypt(parts.join(':'))).toThrow()
    expect(() => createAesGcmCipher(randomBytes(32)).decrypt(c)).toThrow()
    expect(() => createAesGcmCipher(randomBytes(16))).toThrow(/32 bytes/)
  })
})

describe('token bucket', () => {
  it('admits burst, refills continuously, reports reset and retry-after', () => {
    const clock = manualClock(0)
    const bucket = tokenBucket({ burst: 4, rpm: 30, clock })
    const taken = Array.from({ length: 6 }, () => bucket.take('k'))
    expect(taken.map((d) => d.allowed)).toEqual([true, true, true, true, false, false])
    expect(taken[3]).toMatchObject({ remaining: 0, limit: 4, resetSeconds: 8 })
    expect(taken[4]!.retryAfterSeconds).toBe(2)
    clock.advance(1999)
    expect(bucket.take('k').allowed).toBe(false)
    clock.advance(1)
    expect(bucket.take('k').allowed).toBe(true)
    expect(bucket.take('other').remaining).toBe(3)
  })
  it('stays bounded in memory by dropping full idle buckets, and only those', () => {
    const clock = manualClock(0)
    const bucket = tokenBucket({ burst: 2, rpm: 60, clock, maxKeys: 10 })
    for (let i = 0; i < 9; i++) bucket.take(`idle${i}`)
    clock.advance(10_000) // the idle buckets are full again
    bucket.take('busy')
    bucket.take('busy') // empty now: dropping it would hand out a fresh burst
    expect(bucket.size()).toBe(10)
    bucket.take('new') // at the bound: the 9 full idle buckets go, the busy one stays
    expect(bucket.size()).toBe(2)
    expect(bucket.take('busy').allowed).toBe(false)
    expect(bucket.take('new').remaining).toBe(0)
  })
})

describe('ids and model patterns', () => {
  afterEach(() => {
    vi.useRealTimers()
  })
  it('ids carry their prefix and are unique', () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newId('profile')))
    expect(ids.size).toBe(1000)
    for (const id of ids) expect(id).toMatch(/^prof_[a-z0-9]{20}$/)
  })
  it('ids start with their creation time, so a later id sorts after an earlier one', () => {
    vi.useFakeTimers({ now: Date.parse('2026-05-01T12:00:00Z') })
    const first = newId('task')
    vi.advanceTimersByTime(5)
    const second = newId('task')
    expect(second > first).toBe(true)
    expect(parseInt(first.slice(5, 14), 36)).toBe(Date.parse('2026-05-01T12:00:00Z'))
    expect(parseInt(second.slice(5, 14), 36)).toBe(Date.now())
    vi.useRealTimers()
    // Within one millisecond too.
    const burst = Array.from({ length: 200 }, () => newId('task'))
    expect([...burst].sort()).toEqual(burst)
  })
  it('model allow-lists match ids and globs exactly', () => {
    expect(modelAllowed('claude-sonnet-4-5', null)).toBe(true)
    expect(modelAllowed('claude-sonnet-4-5', ['claude-sonnet-*'])).toBe(true)
    expect(modelAllowed('claude-sonnet-4-5', ['claude-haiku-*', 'claude-opus-4-5'])).toBe(false)
    expect(modelAllowed('claude-sonnet-4-5', ['claude.sonnet.4.5'])).toBe(false)
    expect(modelAllowed('xclaude-sonnet-4-5', ['claude-*'])).toBe(false)
  })
})
