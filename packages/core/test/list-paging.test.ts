/** Paging an in-memory list (pool containers, caller keys, deliveries): by number and by key, and the cursor seal. */
import { describe, expect, it } from 'vitest'
import { randomBytes } from 'node:crypto'
import { isApiError } from '@berth/contract'
import { paginate } from '../src/records/collection.js'
import { ListCursors } from '../src/records/cursor.js'
import { createAesGcmCipher } from '../src/ports/cipher.js'

const desc = Array.from({ length: 23 }, (_, i) => `k${String(22 - i).padStart(2, '0')}`)
const self = (x: string) => x

describe('paging an ordered array', () => {
  it('by key reaches every item once, the same pages as by number', () => {
    const seen: string[] = []
    let after: string | undefined
    for (let round = 0; round < 10; round++) {
      const page = paginate(desc, { limit: 5, after }, self)
      expect(page.total).toBe(23)
      if (round < 4) expect(page.items).toEqual(paginate(desc, { page: round + 1, limit: 5 }, self).items)
      seen.push(...page.items)
      if (page.next === null) break
      after = page.next
    }
    expect(seen).toEqual(desc)
    // A key that is no item's still places the page; past the end is empty.
    expect(paginate(desc, { limit: 2, after: 'k10~' }, self).items).toEqual(['k10', 'k09'])
    expect(paginate(desc, { limit: 2, after: 'k00' }, self)).toEqual({ items: [], total: 23, next: null })
  })
})

describe('list cursors', () => {
  const cursors = new ListCursors(createAesGcmCipher(randomBytes(32)))
  const scope = { list: 'tasks.list', caller: 'usr_a', filter: { status: 'running', mode: undefined } }
  const refused = (fn: () => unknown) => {
    try {
      fn()
    } catch (err) {
      return isApiError(err) && err.code === 'VALIDATION_FAILED' && err.message.includes('cursor')
    }
    return false
  }

  it('opens its own cursors only: same list, filters and caller', () => {
    const c = cursors.encode(scope, '2026-01-01T00:00:00.000Z|task_1')
    expect(c).not.toContain('task_1')
    expect(cursors.decode({ ...scope, filter: { status: 'running' } }, c)).toBe('2026-01-01T00:00:00.000Z|task_1')
    expect(refused(() => cursors.decode({ ...scope, caller: 'usr_b' }, c))).toBe(true)
    expect(refused(() => cursors.decode({ ...scope, list: 'workspaces.list' }, c))).toBe(true)
    expect(refused(() => cursors.decode({ ...scope, filter: { status: 'failed' } }, c))).toBe(true)
    const other = new ListCursors(createAesGcmCipher(randomBytes(32)))
    expect(refused(() => other.decode(scope, c))).toBe(true)
    for (const bad of ['', 'abc', c.slice(0, -4), `${c.slice(0, 20)}${c[20] === 'A' ? 'B' : 'A'}${c.slice(21)}`])
      expect(refused(() => cursors.decode(scope, bad))).toBe(true)
  })
})
