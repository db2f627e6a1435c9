/**
 * `@berth/core`'s public surface: the runtime names its index exports are pinned here, so
 * adding or dropping one is a deliberate edit of this list. The schemas (one valibot schema
 * per API shape) come in whole from `schemas/index.ts`; nothing under `src/internal/` leaks.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

/** Everything but the schemas, sorted. */
const PINNED = [
  'ApiError',
  'ContainerError',
  'ContainerPool',
  'DEFAULT_ENVIRONMENT_CAPS',
  'ERROR_STATUS',
  'EventBus',
  'EventLog',
  'FilePathError',
  'GIT_PROVIDERS',
  'IDLE_COMMAND',
  'ID_PREFIX',
  'MANAGED_LABEL',
  'MAX_ENTRIES',
  'PRIVATE_IPV4_RANGES',
  'PRIVATE_IPV6_RANGES',
  'ProviderError',
  'RECIPE_LABEL',
  'RunnerAgent',
  'RunnerEvent',
  'RunnerInput',
  'RunnerModel',
  'RunnerOutcome',
  'RunnerSkill',
  'ToolCall',
  'WarmAgents',
  'abortedExec',
  'adoptRunningWorkspaces',
  'buildOpenApi',
  'byteChannel',
  'checkQueueName',
  'checkRateSettings',
  'collectExec',
  'coordinatedLimiter',
  'createAesGcmCipher',
  'createAuthenticate',
  'createChannelRegistry',
  'createPipeline',
  'createServices',
  'createTaskSocket',
  'defaultPoolName',
  'defineChannel',
  'defineRoute',
  'defineRuntime',
  'deriveOAuthStateKey',
  'errorResponse',
  'execFileOperations',
  'execLifecycle',
  'idPattern',
  'indexEntryFor',
  'isApiError',
  'isContainerError',
  'isFilePathError',
  'isProviderError',
  'jsonLogger',
  'manualClock',
  'memoryCoordination',
  'memoryHub',
  'newId',
  'notFound',
  'privateCidrs',
  'queueRank',
  'randomToken',
  'rateDecision',
  'relativePath',
  'routes',
  'secretForms',
  'silentLogger',
  'systemClock',
  'toByteChunks',
  'toWebStream',
  'tokenBucket',
  'touchesPrivateRange',
  'validationError',
  'withoutIntegration',
]

describe('@berth/core public surface', () => {
  it('exports exactly the pinned names besides the schemas', async () => {
    const index = await import('../src/index.js')
    const schemas = await import('../src/schemas/index.js')
    const names = Object.keys(index).filter((name) => !(name in schemas)).sort()
    expect(names).toEqual(PINNED)
  })

  it('exports every schema, and everything the browser-safe contract entry exports', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    for (const entry of [await import('../src/schemas/index.js'), await import('../src/contract.js')]) {
      const missing = Object.entries(entry).filter(([name, value]) => index[name] !== value).map(([name]) => name)
      expect(missing).toEqual([])
    }
  })

  it('re-exports nothing from src/internal', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    const exported = new Set(Object.values(index))
    const modules = readdirSync(`${SRC}internal`).filter((f) => f.endsWith('.ts'))
    expect(modules.length).toBeGreaterThan(0)
    for (const file of modules) {
      const internal: Record<string, unknown> = await import(/* @vite-ignore */ `${SRC}internal/${file}`)
      const leaked = Object.entries(internal).filter(([, value]) => exported.has(value)).map(([name]) => `${file}: ${name}`)
      expect(leaked).toEqual([])
    }
    // Types leave no runtime trace: no export line of the index names an internal module.
    expect(readFileSync(`${SRC}index.ts`, 'utf8')).not.toMatch(/from '\.\/internal\//)
  })
})
