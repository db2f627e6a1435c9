import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { RunnerInput } from '@berth/contract'
import type { ContainerPool } from '../runtime/index.js'
import type { Store } from '../ports/store.js'
import { brokeredPlaceholder } from '../resources/catalog.js'
import { startAgentProcess, warmKey, type AgentProcess } from './agent-process.js'
import type { RunTokens } from './run-tokens.js'

export interface WarmAgentsOptions {
  runtime: ContainerRuntime
  pool: ContainerPool
  /** The runner's command; `--warm` is appended. */
  command: string[]
  logger: Logger
  /** Agents kept parked at most, all keys together (0: none). */
  max: number
  /** A parked agent no task took for this long gives its container back (default 10 min). */
  idleMs?: number
  /** Working directory of the runner (the workspace). */
  cwd: string
  /** With a credential broker: an agent's token is its own, bound to its task in `store` when a task takes it. */
  tokens?: { issuer: RunTokens; store: Store }
}

/**
 * Whether a runner input carries a credential's value: the model key (no broker), an
 * `env`-delivered secret (a brokered one is a placeholder), Git tokens for the runner's
 * helper, or anything else the runner must redact (MCP server credentials). An agent
 * started with one would hold it while parked, so such inputs run cold.
 *
 * @example
 * ```ts
 * holdsCredential({ ...input, env: { API_TOKEN: 'berth_brokered_sec_1' }, redact: [] }) // false
 * ```
 */
export function holdsCredential(input: RunnerInput): boolean {
  return (
    input.model.api_key !== null ||
    input.redact.length > 0 ||
    (input.git_credentials?.length ?? 0) > 0 ||
    Object.values(input.env).some((value) => !value.startsWith(brokeredPlaceholder('')))
  )
}

/** An agent waiting for a task, and the timer that reclaims it when none comes. */
interface Parked {
  agent: AgentProcess
  idle?: ReturnType<typeof setTimeout>
}

/**
 * Warm agents: pooled containers whose runner has already started Claude Code in the
 * SDK's streaming-input mode, keyed by {@link warmKey}. A task whose key matches takes
 * one and hands it its prompt (no Node, SDK or Claude Code start on its critical path);
 * every other task runs cold. Agents are started from idle pool containers only, at most
 * `max`, and give their container back when the pool needs room.
 *
 * @example
 * ```ts
 * const agents = new WarmAgents({ runtime, pool, command: ['node', '/opt/berth-runner/main.js'], logger, max: 2, cwd: '/workspace' })
 * const agent = await agents.takeOrWait(warmKey(owner, input)) // null: run cold
 * agents.prepare(owner, input)                      // one for the next task like it
 * ```
 */
export class WarmAgents {
  private readonly parked: Parked[] = []
  private starting = 0
  /** The starts under way per key (each settles once its agent is parked, or failed). */
  private readonly startingFor = new Map<string, Set<Promise<void>>>()
  private closed = false
  /** Aborts the pool claims of agents still starting when the set closes. */
  private readonly stopping = new AbortController()
  /** Refills held back per key until their task's first token ({@link refill}); a task that finds none parked starts one. */
  private readonly held = new Map<string, Set<() => void>>()
  /** Keys whose last task found no ready agent: their next refill starts one more, so back-to-back tasks find one up. */
  private readonly short = new Set<string>()

  constructor(private readonly o: WarmAgentsOptions) {}

  /** Agents parked (`ready`: Claude Code up and waiting), and being started (container claim, exec). */
  stats(): { parked: number; ready: number; starting: number } {
    this.prune()
    return {
      parked: this.parked.length,
      ready: this.parked.filter((p) => p.agent.ready).length,
      starting: this.starting,
    }
  }

  /**
   * A live parked agent for `key`, removed from the set; `null` when there is none. A ready
   * one first, the newest first: after a burst, the agents a steady caller no longer needs
   * are the oldest, and they idle out.
   */
  take(key: string): AgentProcess | null {
    this.prune()
    let i = this.parked.findLastIndex((p) => p.agent.key === key && p.agent.ready)
    if (i < 0) i = this.parked.findLastIndex((p) => p.agent.key === key)
    if (i < 0) return null
    const [taken] = this.parked.splice(i, 1)
    clearTimeout(taken!.idle)
    return taken!.agent
  }

  /**
   * {@link take}, or when none is parked but one is being started for `key` (a burst came
   * before the refill was up), that one once it is: its container is claimed and its
   * runner started, so the wait is shorter than a cold start. `null`: run cold.
   */
  async takeOrWait(key: string): Promise<AgentProcess | null> {
    // Agents of the key exist but none is up: tasks come faster than one refill each.
    const mine = this.parked.filter((p) => p.agent.key === key && !p.agent.dead)
    if (!mine.some((p) => p.agent.ready) && (mine.length > 0 || this.startingFor.has(key))) this.short.add(key)
    const now = this.take(key)
    if (now) return now
    // A refill still held back by a running task: this task needs it now.
    const held = this.held.get(key)?.values().next().value
    held?.()
    const starting = this.startingFor.get(key)
    if (!starting?.size) return null
    await Promise.race(starting)
    return this.take(key)
  }

  /**
   * A refill for tasks like `input`, held back until the returned function is called (the
   * task that took an agent has its first token, or ended), so a new agent's start (Node and
   * Claude Code, most of a CPU-second) does not compete with that task's first token on a
   * small machine. A task of the same key that finds no agent parked starts it at once (see
   * {@link takeOrWait}). After a task found no ready agent, the refill starts two.
   *
   * @example
   * ```ts
   * const startRefill = agents.refill(owner, input)
   * // ... the task's first token arrives
   * startRefill()
   * ```
   */
  refill(owner: string, input: RunnerInput): () => void {
    const key = warmKey(owner, input)
    const held = this.held.get(key) ?? new Set<() => void>()
    this.held.set(key, held)
    let done = false
    const go = () => {
      if (done) return
      done = true
      held.delete(go)
      if (held.size === 0 && this.held.get(key) === held) this.held.delete(key)
      const extra = this.short.delete(key)
      this.prepare(owner, input)
      if (extra) this.prepare(owner, input)
    }
    held.add(go)
    return go
  }

  /** Give back the oldest parked agent's container (the pool needs room). True when one went. */
  async evictOne(): Promise<boolean> {
    this.prune()
    const p = this.parked.shift()
    if (!p) return false
    clearTimeout(p.idle)
    await p.agent.lease.release()
    return true
  }

  /**
   * Start one agent for tasks like `input` now (in the background; failures are logged),
   * when there is room: fewer than `max` parked or starting, and room in the pool for this
   * agent's container and one more (an idle one, or `max` and the memory budget allowing a
   * creation), so a parked agent never makes a cold task wait (on a saturated pool it would
   * only be evicted again, its start-up wasted). Never for an input that
   * {@link holdsCredential}: a parked agent holds no secret.
   */
  prepare(owner: string, input: RunnerInput): void {
    this.prune()
    if (this.closed || this.parked.length + this.starting >= this.o.max) return
    if (this.o.pool.room() < 2 || holdsCredential(input)) return
    this.starting++
    const key = warmKey(owner, input)
    const runs = this.startingFor.get(key) ?? new Set()
    this.startingFor.set(key, runs)
    const run: Promise<void> = this.start(key, owner, input)
      .catch((err) => this.o.logger.warn('could not start a warm agent', { error: String(err) }))
      .finally(() => {
        this.starting--
        runs.delete(run)
        if (runs.size === 0 && this.startingFor.get(key) === runs) this.startingFor.delete(key)
      })
    runs.add(run)
  }

  private async start(key: string, owner: string, input: RunnerInput): Promise<void> {
    const lease = await this.o.pool.claim({
      owner_id: owner,
      purpose: 'batch',
      priority: 'low',
      signal: this.stopping.signal,
    })
    if (this.closed) return lease.release()
    const agent = await startAgentProcess({
      runtime: this.o.runtime,
      command: this.o.command,
      logger: this.o.logger,
      cwd: this.o.cwd,
      lease,
      key,
      input,
      tokens: this.o.tokens,
    })
    const parked: Parked = { agent }
    // An agent that ends while parked is dropped, its container reaped.
    void agent.exited.then(() => {
      const i = this.parked.indexOf(parked)
      if (i >= 0) {
        this.parked.splice(i, 1)
        void lease.release().catch(() => {})
      }
    })
    if (this.closed) {
      await lease.release()
      return
    }
    parked.idle = setTimeout(() => this.reclaim(parked), this.o.idleMs ?? 10 * 60_000)
    parked.idle.unref?.()
    this.parked.push(parked)
  }

  /** A parked agent no task took in time: its container goes back (the key is refilled only when a task uses it). */
  private reclaim(parked: Parked): void {
    const i = this.parked.indexOf(parked)
    if (i < 0) return
    this.parked.splice(i, 1)
    void parked.agent.lease
      .release()
      .catch((err) => this.o.logger.warn('could not reclaim an idle warm agent', { error: String(err) }))
  }

  private prune(): void {
    for (let i = this.parked.length - 1; i >= 0; i--) if (this.parked[i]!.agent.dead) this.parked.splice(i, 1)
  }

  /** Stop starting agents and give every parked one's container back. */
  async close(): Promise<void> {
    this.closed = true
    this.stopping.abort()
    for (const p of this.parked) clearTimeout(p.idle)
    await Promise.all(this.parked.splice(0).map((p) => p.agent.lease.release().catch(() => {})))
    // Agents still starting see `closed` and give theirs back too: waited for here, so a
    // removal (and its workspace disk) is not cut short by the process exiting after close.
    await Promise.all([...this.startingFor.values()].flatMap((runs) => [...runs]))
  }
}
