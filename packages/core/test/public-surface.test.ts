/**
 * `@berth/core`'s public surface: the runtime names its index exports are pinned here, so
 * adding or dropping one is a deliberate edit of this list. Everything `@berth/contract`
 * exports comes in whole (the errors, ids, schemas, route declarations and protocols), but
 * `routes` and `defineRoute`, which core replaces with routes that carry their handlers;
 * nothing under `src/internal/` leaks.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import * as contract from '@berth/contract'
import { describe, expect, it } from 'vitest'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

/** Core's own names (not the contract's), sorted. */
const PINNED = [
  'CallerCaps',
  'ContainerError',
  'ContainerPool',
  'CoordinationUnavailableError',
  'DEFAULT_ENVIRONMENT_CAPS',
  'DEFAULT_SCHEDULE_LIMITS',
  'DEFAULT_TIME_LIMIT',
  'DISK_LABEL',
  'EventBus',
  'EventLog',
  'FilePathError',
  'IDLE_COMMAND',
  'InstanceReadiness',
  'MANAGED_LABEL',
  'MAX_ENTRIES',
  'MAX_SCHEDULE_MIN_INTERVAL_S',
  'PRIVATE_IPV4_RANGES',
  'PRIVATE_IPV6_RANGES',
  'ProviderError',
  'RECIPE_LABEL',
  'RunGrants',
  'RunTokens',
  'WarmAgents',
  'abortedExec',
  'activeTraceId',
  'adoptRunningWorkspaces',
  'attachHandlers',
  'brokeredPlaceholder',
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
  'defineHandlers',
  'defineRoute',
  'defineRuntime',
  'deriveOAuthStateKey',
  'diskLimits',
  'errorResponse',
  'execFileOperations',
  'execLifecycle',
  'indexEntryFor',
  'isContainerError',
  'isDiskName',
  'isFilePathError',
  'isProviderError',
  'jsonLogger',
  'manualClock',
  'memoryBlobs',
  'memoryCoordination',
  'memoryHub',
  'noopMetrics',
  'privateCidrs',
  'pruneDeployment',
  'queueRank',
  'rateDecision',
  'readinessOf',
  'relativePath',
  'releaseDisk',
  'releaseUnusedDisk',
  'routes',
  'silentLogger',
  'sweepOrphanDisks',
  'systemClock',
  'tidyOldDisks',
  'toByteChunks',
  'toWebStream',
  'tokenBucket',
  'touchesPrivateRange',
  'traceContext',
  'traceparentOf',
  'tracer',
  'withoutIntegration',
  'workspaceDisks',
]

describe('@berth/core public surface', () => {
  it('exports exactly the pinned names besides the contract', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    const names = Object.keys(index)
      .filter((name) => (contract as Record<string, unknown>)[name] !== index[name])
      .sort()
    expect(names).toEqual(PINNED)
  })

  it('exports everything the contract exports, routes and defineRoute with their handlers', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    const differ = Object.entries(contract)
      .filter(([name, value]) => index[name] !== value)
      .map(([name]) => name)
    expect(differ.sort()).toEqual(['defineRoute', 'routes'])
    expect(index.routes).toHaveLength(contract.routes.length)
    for (const route of index.routes as { name: string; handle: unknown }[])
      expect(typeof route.handle, route.name).toBe('function')
  })

  it('re-exports nothing from src/internal', async () => {
    const index: Record<string, unknown> = await import('../src/index.js')
    const exported = new Set(Object.values(index))
    const modules = readdirSync(`${SRC}internal`).filter((f) => f.endsWith('.ts'))
    expect(modules.length).toBeGreaterThan(0)
    for (const file of modules) {
      const internal: Record<string, unknown> = await import(/* @vite-ignore */ `${SRC}internal/${file}`)
      const leaked = Object.entries(internal)
        .filter(([, value]) => exported.has(value))
        .map(([name]) => `${file}: ${name}`)
      expect(leaked).toEqual([])
    }
    // Types leave no runtime trace: no export line of the index names an internal module.
    expect(readFileSync(`${SRC}index.ts`, 'utf8')).not.toMatch(/from '\.\/internal\//)
  })
})
