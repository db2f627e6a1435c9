import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import type { ContainerRuntime, ContainerSpec, ContainerSummary, PoolStats } from '@berth/core'
import { readEngine, type EngineInfo } from '@berth/testkit'
import type { TestServer } from './helpers.js'

/** The engines every pool suite runs on (provisioned by pool.global-setup.ts). */
export const ENGINES = ['podman', 'docker'] as const satisfies readonly EngineInfo['engine'][]

/** A runtime for a provisioned engine, recording every create spec (to tell warm-ups from claims). */
export function engineRuntime(engine: EngineInfo['engine']): {
  info: EngineInfo
  runtime: ContainerRuntime
  creates: ContainerSpec[]
} {
  const info = readEngine(engine)
  const base =
    engine === 'docker'
      ? dockerRuntime({ socketPath: info.socketPath })
      : podmanRuntime({ socketPath: info.socketPath })
  const creates: ContainerSpec[] = []
  const runtime: ContainerRuntime = Object.create(base)
  runtime.create = (spec) => {
    creates.push(spec)
    return base.create(spec)
  }
  return { info, runtime, creates }
}

/** A pool name no other suite (or run) shares: the `berth.pool` label the sweeps go by. */
export function uniquePoolName(tag: string): string {
  return `t-${tag}-${process.pid}-${randomBytes(4).toString('hex')}`
}

export function tempDataDir(): string {
  return mkdtempSync(join(tmpdir(), 'berth-pool-test-'))
}

/** The pool's containers as the engine sees them, stopped ones included. */
export function onEngine(runtime: ContainerRuntime, pool: string): Promise<ContainerSummary[]> {
  return runtime.list({ labels: { 'berth.pool': pool }, all: true })
}

/** Remove every container carrying the pool's label; resolves how many it found. */
export async function sweep(runtime: ContainerRuntime, pool: string): Promise<number> {
  const left = await onEngine(runtime, pool)
  await Promise.all(left.map((c) => runtime.remove(c.id)))
  return left.length
}

export function expectedStats(s: Partial<PoolStats>): PoolStats {
  return { min: 2, max: 3, in_use: 0, idle: 2, ...s }
}

/** Stop the HTTP server and close Berth, removing its containers (startServer's close keeps them). */
export async function closeRemoving(s: TestServer | undefined, dataDir: string): Promise<void> {
  if (s) {
    s.server.closeAllConnections()
    await new Promise<void>((r) => s.server.close(() => r()))
    await s.berth.close({ removeContainers: true })
  }
  rmSync(dataDir, { recursive: true, force: true })
}
