/** The normal mix of the soak: its seeded generator and the batch prompts it draws from. */

/** A small seeded generator (mulberry32), so a failing mix can be replayed with its seed. */
export function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The batch prompts of the mix and what each must end as (`any`: cancels and kills may intervene). */
export const KINDS = [
  { kind: 'tools', weight: 4, body: { prompt: 'Loop [[berth:turns 2]] [[berth:text done]]' } },
  { kind: 'quick', weight: 3, body: { prompt: 'Answer [[berth:text ok]]' } },
  { kind: 'slow', weight: 2, body: { prompt: 'Slowly [[berth:slow 40]] [[berth:turns 2]] [[berth:text slow done]]' } },
  { kind: 'turn-limit', weight: 1, body: { prompt: 'Too long [[berth:turns 4]]', max_turns: 2 } },
  { kind: 'model-error', weight: 1, body: { prompt: 'Broken [[berth:error invalid]]' } },
] as const

export function pick(rand: () => number): (typeof KINDS)[number] {
  const total = KINDS.reduce((n, k) => n + k.weight, 0)
  let r = rand() * total
  for (const k of KINDS) {
    r -= k.weight
    if (r < 0) return k
  }
  return KINDS[0]
}
