/** A synchronous "does this engine answer?" for `createBerth`, which must pick its runtime before it returns. */
import { Worker } from 'node:worker_threads'

/** Where an engine listens, as dockerode's connection options name it. */
export interface ProbeTarget {
  socketPath?: string | undefined
  host?: string | undefined
  port?: number | string | undefined
  protocol?: string | undefined
  ca?: unknown
  cert?: unknown
  key?: unknown
}

// Runs in a worker with only Node built-ins: GET /_ping (Docker and Podman both answer it)
// on every target at once, writing 1 (answers) or 2 (does not) into its slot, then waking
// the caller, which blocks on the shared memory until every slot is set or time is up.
const PING_ALL = `
const { workerData } = require('node:worker_threads')
const { targets, slots, timeoutMs } = workerData
const view = new Int32Array(slots)
const done = (i, ok) => { Atomics.store(view, i + 1, ok ? 1 : 2); Atomics.add(view, 0, 1); Atomics.notify(view, 0) }
targets.forEach((t, i) => {
  const client = require(t.protocol === 'https' ? 'node:https' : 'node:http')
  const req = client.get({ socketPath: t.socketPath, host: t.host, port: t.port, ca: t.ca, cert: t.cert, key: t.key, path: '/_ping', timeout: timeoutMs }, (res) => {
    res.resume()
    done(i, res.statusCode === 200)
  })
  req.on('timeout', () => req.destroy(new Error('timeout')))
  req.on('error', () => done(i, false))
})
`

/**
 * Which of `targets` answer a ping within `timeoutMs`, checked in parallel on a worker
 * thread while this thread waits (so `createBerth` can stay synchronous). Targets this
 * cannot ping without the engine's own client (`ssh://`) count as answering.
 *
 * @example
 * ```ts
 * answerSync([{ socketPath: '/var/run/docker.sock' }], 3000) // [true] when Docker runs
 * ```
 */
export function answerSync(targets: readonly ProbeTarget[], timeoutMs: number): boolean[] {
  const pingable = targets.map((t) => t.protocol !== 'ssh')
  const list = targets.filter((_, i) => pingable[i])
  const slots = new SharedArrayBuffer(4 * (list.length + 1))
  const view = new Int32Array(slots)
  if (list.length > 0) {
    const worker = new Worker(PING_ALL, {
      eval: true,
      workerData: { targets: list.map(plain), slots, timeoutMs },
    })
    worker.unref()
    const until = performance.now() + timeoutMs + 500
    for (let seen = 0; seen < list.length; seen = Atomics.load(view, 0)) {
      const left = until - performance.now()
      if (left <= 0) break
      Atomics.wait(view, 0, seen, left)
    }
    void worker.terminate()
  }
  let next = 1
  return pingable.map((p) => (p ? Atomics.load(view, next++) === 1 : true))
}

/** The fields a worker can receive (no functions, no agents). */
function plain(t: ProbeTarget): ProbeTarget {
  const { socketPath, host, port, protocol, ca, cert, key } = t
  return { socketPath, host, port, protocol, ca, cert, key }
}
