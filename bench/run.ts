/**
 * `pnpm bench`: every benchmark, one after the other, each printing its own table.
 * bench/runtime.ts (container engines), bench/workspaces.ts (transcripts, WebSocket
 * fan-out), bench/tasks.ts (agent tasks: overhead over the bare runner, throughput) and
 * bench/storage.ts (lists and reads as records grow, per store driver) run when present;
 * bench/reads.ts (single-record reads vs bare h3 on SQLite and Postgres) runs after the HTTP benchmark;
 * bench/metrics.ts (the HTTP path with Prometheus metrics on vs off) and bench/gateway.ts
 * (the model gateway's added latency) run after the HTTP benchmark,
 * bench/store.ts (sqlite, redis and postgres side by side) after the storage benchmark,
 * then bench/store-http.ts (the standalone server on SQLite vs Postgres: req/s and tasks/s);
 * bench/checkpoints.ts (a session checkpoint's time and space per task) after the warm agents;
 * bench/ttft.ts (time to first token as a caller sees it, per step), then bench/followups.ts
 * (session follow-ups: first token, CPU per follow-up, idle sessions' memory) run last.
 */
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { main as bundleBench } from './bundle.js'
import { main as httpBench } from './http.js'
import { main as metricsBench } from './metrics.js'

const started = Date.now()
let failed = false

try {
  await bundleBench()
} catch (err) {
  failed = true
  console.error(`\nBundle sizes failed: ${(err as Error).stack ?? String(err)}`)
}

try {
  await httpBench()
} catch (err) {
  failed = true
  console.error(`\nHTTP benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// The reads callers make most (a task polled, a workspace, a session, a file listing) vs bare h3, SQLite and Postgres (issue 43).
try {
  const reads = (await import(new URL('./reads.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await reads.main()
} catch (err) {
  failed = true
  console.error(`\nReads benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Prometheus metrics on vs off on the same HTTP path (issue 28).
try {
  await metricsBench()
} catch (err) {
  failed = true
  console.error(`\nMetrics benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// The model gateway's added latency to the first streamed event (issue 25: under 5 ms p50).
try {
  const gateway = (await import(new URL('./gateway.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await gateway.main()
} catch (err) {
  failed = true
  console.error(`\nModel gateway benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

const runtimeUrl = new URL('./runtime.ts', import.meta.url)
if (existsSync(fileURLToPath(runtimeUrl))) {
  try {
    const runtime = (await import(runtimeUrl.href)) as { main?: () => unknown }
    if (typeof runtime.main !== 'function') throw new Error('bench/runtime.ts does not export main()')
    await runtime.main()
  } catch (err) {
    failed = true
    console.error(`\nRuntime benchmark failed: ${(err as Error).stack ?? String(err)}`)
  }
} else {
  console.log('\nRuntime benchmarks skipped: bench/runtime.ts is not present.')
}

const workspacesUrl = new URL('./workspaces.ts', import.meta.url)
if (existsSync(fileURLToPath(workspacesUrl))) {
  try {
    const workspaces = (await import(workspacesUrl.href)) as { main?: () => unknown }
    if (typeof workspaces.main !== 'function') throw new Error('bench/workspaces.ts does not export main()')
    await workspaces.main()
  } catch (err) {
    failed = true
    console.error(`\nWorkspaces benchmark failed: ${(err as Error).stack ?? String(err)}`)
  }
} else {
  console.log('\nWorkspaces benchmarks skipped: bench/workspaces.ts is not present.')
}

const tasksUrl = new URL('./tasks.ts', import.meta.url)
if (existsSync(fileURLToPath(tasksUrl))) {
  try {
    const tasks = (await import(tasksUrl.href)) as { main?: () => unknown }
    if (typeof tasks.main !== 'function') throw new Error('bench/tasks.ts does not export main()')
    await tasks.main()
  } catch (err) {
    failed = true
    console.error(`\nTasks benchmark failed: ${(err as Error).stack ?? String(err)}`)
  }
} else {
  console.log('\nTasks benchmarks skipped: bench/tasks.ts is not present.')
}

const storageUrl = new URL('./storage.ts', import.meta.url)
if (existsSync(fileURLToPath(storageUrl))) {
  try {
    const storage = (await import(storageUrl.href)) as { main?: () => unknown }
    if (typeof storage.main !== 'function') throw new Error('bench/storage.ts does not export main()')
    await storage.main()
  } catch (err) {
    failed = true
    console.error(`\nStorage benchmark failed: ${(err as Error).stack ?? String(err)}`)
  }
} else {
  console.log('\nStorage benchmarks skipped: bench/storage.ts is not present.')
}

// Stores side by side (sqlite, redis, postgres): record writes and lists, transcript appends and reads.
try {
  const store = (await import(new URL('./store.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await store.main()
} catch (err) {
  failed = true
  console.error(`\nStore benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// The standalone server on SQLite vs Postgres: requests and tasks per second, CPU per request.
try {
  const storeHttp = (await import(new URL('./store-http.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await storeHttp.main()
} catch (err) {
  failed = true
  console.error(`\nStore HTTP benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Several instances on one Redis: throughput with 1, 2, 3; redis coordination cost vs memory.
try {
  const instances = (await import(new URL('./instances.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await instances.main()
} catch (err) {
  failed = true
  console.error(`\nInstances benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Warm agents vs cold starts (first token, throughput), per engine.
try {
  const warm = (await import(new URL('./warm.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await warm.main()
} catch (err) {
  failed = true
  console.error(`\nWarm agents benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Checkpoints of sessions: time at a task's end and space added, 1 MB and 100 MB workspaces, per runtime (issue 42).
try {
  const checkpoints = (await import(new URL('./checkpoints.ts', import.meta.url).href)) as {
    main: () => Promise<unknown>
  }
  await checkpoints.main()
} catch (err) {
  failed = true
  console.error(`\nCheckpoints benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// gVisor vs runc: container start, exec, a CPU-bound tool, per engine (issue 29).
try {
  const gvisor = (await import(new URL('./gvisor.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await gvisor.main()
} catch (err) {
  failed = true
  console.error(`\ngVisor benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Time to first token against the standalone server as users run it, per step; throughput with the CPU split.
try {
  const ttft = (await import(new URL('./ttft.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await ttft.main()
} catch (err) {
  failed = true
  console.error(`\nTime to first token benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

// Session follow-ups (issue 42): first token with gaps and back to back, CPU per follow-up,
// idle sessions' memory; against another build too when BENCH_FOLLOWUP_BEFORE names one.
try {
  const followups = (await import(new URL('./followups.ts', import.meta.url).href)) as { main: () => Promise<unknown> }
  await followups.main()
} catch (err) {
  failed = true
  console.error(`\nSession follow-ups benchmark failed: ${(err as Error).stack ?? String(err)}`)
}

console.log(`\nBenchmarks done in ${((Date.now() - started) / 1000).toFixed(1)} s.`)
// A benchmark that could not run is a failure; a number below target is reported, not fatal.
process.exit(failed ? 1 : 0)
