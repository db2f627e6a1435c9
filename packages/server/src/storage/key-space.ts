/**
 * Every key, bucketed by its first two `:` segments, so `keys(prefix)` reads only the
 * bucket(s) the prefix can match instead of every key stored.
 *
 * @example
 * ```ts
 * const ks = new KeySpace()
 * ks.add('pool:main:ctr_1')
 * ks.match('pool:main:') // ['pool:main:ctr_1']
 * ```
 */
export class KeySpace {
  private readonly buckets = new Map<string, Map<string, Set<string>>>()

  private static split(key: string): [string, string] {
    const a = key.indexOf(':')
    if (a < 0) return [key, '']
    const b = key.indexOf(':', a + 1)
    return [key.slice(0, a), b < 0 ? key.slice(a + 1) : key.slice(a + 1, b)]
  }

  add(key: string): void {
    const [one, two] = KeySpace.split(key)
    let inner = this.buckets.get(one)
    if (!inner) {
      inner = new Map()
      this.buckets.set(one, inner)
    }
    let set = inner.get(two)
    if (!set) {
      set = new Set()
      inner.set(two, set)
    }
    set.add(key)
  }

  delete(key: string): void {
    const [one, two] = KeySpace.split(key)
    const inner = this.buckets.get(one)
    const set = inner?.get(two)
    if (!set?.delete(key)) return
    if (set.size === 0) inner!.delete(two)
    if (inner!.size === 0) this.buckets.delete(one)
  }

  /** Keys starting with `prefix`, sorted. */
  match(prefix: string): string[] {
    const a = prefix.indexOf(':')
    const b = a < 0 ? -1 : prefix.indexOf(':', a + 1)
    const sets: Set<string>[] = []
    if (b >= 0) {
      const set = this.buckets.get(prefix.slice(0, a))?.get(prefix.slice(a + 1, b))
      if (set) sets.push(set)
    } else if (a >= 0) {
      for (const [two, set] of this.buckets.get(prefix.slice(0, a)) ?? [])
        if (two.startsWith(prefix.slice(a + 1))) sets.push(set)
    } else {
      for (const [one, inner] of this.buckets) if (one.startsWith(prefix)) sets.push(...inner.values())
    }
    const out: string[] = []
    for (const set of sets) for (const k of set) if (k.startsWith(prefix)) out.push(k)
    return out.sort()
  }
}
