/**
 * Attribute a `--cpu-prof` profile of a Berth server to the layers of a request: each sample
 * goes to the layer of the innermost stack frame a rule below recognises (by function name
 * and script URL), so `JSON.stringify` called by the request log counts as the log, and
 * called by the response as the response. Samples outside the measured windows, and idle
 * ones, are dropped.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string }
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  startTime: number
  samples: number[]
  timeDeltas: number[]
}

/** Layers in the order the table prints them; the first rule a frame matches wins. */
export const LAYER_RULES: { layer: string; test: (fn: string, url: string) => boolean }[] = [
  { layer: 'log', test: (fn, url) => /ports\/logger|\/logger\.[jt]s/.test(url) || /^(emit|jsonLogger)$/.test(fn) },
  { layer: 'metrics', test: (fn, url) => /\/metrics\/|prom-client/.test(url) || fn === 'requestEnded' },
  {
    layer: 'tracing, request scope',
    test: (fn, url) =>
      /@opentelemetry|request-span|audit\/context|tracing\.[jt]s/.test(url) || /^(requestSpan|inRequest)$/.test(fn),
  },
  {
    layer: 'rate limit',
    test: (fn, url) => /limits\/rate-limit/.test(url) || /^(take|rateHeaders|rateLimited|tokenBucket)$/.test(fn),
  },
  {
    layer: 'auth',
    test: (fn, url) =>
      /transport\/auth|resources\/users/.test(url) ||
      /^(authenticate|bearerToken|callerFor|createAuthenticate)$/.test(fn),
  },
  // valibot itself has no rule: its frames count for whoever called it (params or the view).
  {
    layer: 'validation (params)',
    test: (fn, url) => /internal\/input/.test(url) || /^(parseInput|coerceQuery)$/.test(fn),
  },
  { layer: 'view (record → API shape)', test: (fn, url) => /records\/(view|project)/.test(url) || fn === 'toView' },
  {
    layer: 'store read',
    test: (_fn, url) => /\/store|sqlite|libsql|unstorage|records\/|resources\/profiles|routes\/crud/.test(url),
  },
  {
    layer: 'response (JSON, headers, write)',
    test: (fn, url) =>
      /transport\/response|node_modules\/srvx\//.test(url) || /^(json|toResponse|errorResponse)$/.test(fn),
  },
  { layer: 'pipeline glue', test: (_fn, url) => /transport\/pipeline|\/route\.[jt]s|wiring\/app/.test(url) },
  { layer: 'h3 (router, handler)', test: (_fn, url) => /node_modules\/h3\//.test(url) },
]

/** Node's own frames count as a layer only when no frame of a layer above called them (parsing, sockets). */
const NODE = 'node:http, sockets'
/** Layers no rule matched: V8 and libuv work outside any script (GC, `(program)`), and the rest. */
const GC = 'garbage collector'
const OTHER = 'other'

function layerOfFrame(fn: string, url: string): string | undefined {
  if (fn === '(garbage collector)') return GC
  // Rules see a dependency's own path: pnpm's store directory names list its peers (`h3@2_srvx@1`).
  const own = url.slice(url.lastIndexOf('/node_modules/') + 1)
  for (const r of LAYER_RULES) if (r.test(fn, own)) return r.layer
  return undefined
}

/**
 * Samples per layer over the windows (`[startUs, endUs]` on the profile's clock; none given:
 * the whole profile).
 *
 * @example
 * ```ts
 * const { samples, total } = layerSamples(JSON.parse(readFileSync(file, 'utf8')), windows)
 * ```
 */
export function layerSamples(
  profile: Profile,
  windows: { startUs: number; endUs: number }[] = [],
): { samples: Map<string, number>; total: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const layerOfNode = new Map<number, string>()
  const resolve = (id: number): string => {
    const memo = layerOfNode.get(id)
    if (memo !== undefined) return memo
    const { functionName, url } = byId.get(id)!.callFrame
    const p = parent.get(id)
    const above = p === undefined ? OTHER : resolve(p)
    // The innermost recognised frame wins: a frame's own rule beats its callers', except Node's.
    const own = layerOfFrame(functionName, url)
    const layer = own ?? (url.startsWith('node:') && (above === OTHER || above === NODE) ? NODE : above)
    layerOfNode.set(id, layer)
    return layer
  }
  const samples = new Map<string, number>()
  let total = 0
  let t = profile.startTime
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i] ?? 0
    if (windows.length && !windows.some((w) => t >= w.startUs && t <= w.endUs)) return
    const fn = byId.get(id)?.callFrame.functionName
    if (fn === '(idle)') return
    const layer = resolve(id)
    samples.set(layer, (samples.get(layer) ?? 0) + 1)
    total++
  })
  return { samples, total }
}

/**
 * The layer shares of every `.cpuprofile` in `dir`, summed, in the order of
 * {@link LAYER_RULES} (then GC and other), as `{ layer, share }` with shares adding up to 1.
 *
 * @example
 * ```ts
 * for (const { layer, share } of layerShares('/tmp/prof', host.windows)) console.log(layer, share)
 * ```
 */
export function layerShares(
  dir: string,
  windows: { startUs: number; endUs: number }[] = [],
): { layer: string; share: number; samples: number }[] {
  const all = new Map<string, number>()
  let total = 0
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.cpuprofile'))) {
    const r = layerSamples(JSON.parse(readFileSync(join(dir, f), 'utf8')) as Profile, windows)
    for (const [k, n] of r.samples) all.set(k, (all.get(k) ?? 0) + n)
    total += r.total
  }
  const order = [...LAYER_RULES.map((r) => r.layer), NODE, GC, OTHER]
  return order.map((layer) => ({
    layer,
    samples: all.get(layer) ?? 0,
    share: total ? (all.get(layer) ?? 0) / total : 0,
  }))
}
