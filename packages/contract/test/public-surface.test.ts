/**
 * `@berth/contract`'s public surface and its one rule: it runs anywhere. The runtime names
 * its index exports are pinned here besides the schemas (which come in whole), and no source
 * file imports a Node module or another Berth package.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

/** Everything but the schemas, sorted. */
const PINNED = [
  'ACTIVE_TASK_STATUSES',
  'ApiError',
  'ClientEnvelope',
  'ClientMessage',
  'ENDED_TASK_STATUSES',
  'ERROR_STATUS',
  'ErrorMessage',
  'ID_PREFIX',
  'MODEL_PRICES',
  'PongMessage',
  'RunnerAgent',
  'RunnerControl',
  'RunnerEvent',
  'RunnerInput',
  'RunnerModel',
  'RunnerModelUsage',
  'RunnerOutcome',
  'RunnerSkill',
  'SLOW_CONSUMER_CLOSE',
  'ServerMessage',
  'SubmittedMessage',
  'TASK_STATUSES',
  'TRANSCRIPT_EVENT_TYPES',
  'TaskEvent',
  'TaskEventMessage',
  'TaskStatusMessage',
  'ToolCall',
  'UNKNOWN_MODEL_PRICE',
  'WEB_SEARCH_PRICE_USD',
  'costOf',
  'crudRoutes',
  'defineRoute',
  'documentedSchemas',
  'emptyUsage',
  'idPattern',
  'isApiError',
  'isEndedStatus',
  'mergeUsage',
  'modelAllowed',
  'newId',
  'notFound',
  'priceOf',
  'randomToken',
  'routes',
  'secretForms',
  'validationError',
]

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  )
}

describe('@berth/contract public surface', () => {
  it('exports exactly the pinned names besides the schemas', async () => {
    const index = await import('../src/index.js')
    const schemaModules = readdirSync(`${SRC}schemas`).filter((f) => f.endsWith('.ts'))
    const schemaNames = new Set<string>()
    for (const file of schemaModules)
      for (const name of Object.keys(await import(/* @vite-ignore */ `${SRC}schemas/${file}`))) schemaNames.add(name)
    expect(
      Object.keys(index)
        .filter((name) => !schemaNames.has(name))
        .sort(),
    ).toEqual(PINNED)
  })

  it('exports every schema module whole', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    for (const file of readdirSync(`${SRC}schemas`).filter((f) => f.endsWith('.ts'))) {
      const entry: Record<string, unknown> = await import(/* @vite-ignore */ `${SRC}schemas/${file}`)
      const missing = Object.entries(entry)
        .filter(([name, value]) => index[name] !== value)
        .map(([name]) => `${file}: ${name}`)
      expect(missing).toEqual([])
    }
  })

  it('imports no Node module, no other Berth package and nothing but valibot', () => {
    const files = sources(SRC)
    expect(files.length).toBeGreaterThan(20)
    const outside = files.flatMap((file) =>
      [...readFileSync(file, 'utf8').matchAll(/^(?:import|export)[^'"]*from '([^']+)'/gm)]
        .map((m) => m[1]!)
        .filter((spec) => !spec.startsWith('.') && spec !== 'valibot')
        .map((spec) => `${file.slice(SRC.length)}: ${spec}`),
    )
    expect(outside).toEqual([])
  })

  it('declares every route without a handler', async () => {
    const { routes } = await import('../src/index.js')
    expect(routes.length).toBeGreaterThan(50)
    for (const route of routes) expect(route, route.name).not.toHaveProperty('handle')
  })
})
