/** Sessions' living agents: Claude Code kept up in a session's warm container between its tasks. */
import type { BackgroundTask, RunnerEvent, RunnerInput } from '@berth/contract'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { Lease } from '../runtime/index.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import { startAgentProcess, type AgentProcess } from './agent-process.js'
import { requireEngine, type TaskEngine } from './engine.js'
import { WORKSPACE_DIR } from './materialize.js'
import type { RunTokens } from './run-tokens.js'

export interface LivingAgentsOptions {
  engine: TaskEngine | undefined
  workspaces: WorkspacesService
  logger: Logger
  /** With a credential broker: an agent's token is its own, bound to each task it serves. */
  tokens?: { issuer: RunTokens; store: Store } | undefined
}

/** A workspace's living agent and what it runs in the background. */
interface Living {
  owner: string
  /** Null while a run has it. */
  agent: AgentProcess | null
  since: string
  tasks: number
  background: Map<string, BackgroundTask>
  /** The record's `agent` writes, one after another. */
  writes: Promise<void>
}

/**
 * The living agent of each session whose container is warm on this instance. A session
 * task's run takes it ({@link LivingAgents.take}) or starts one ({@link LivingAgents.start})
 * and, when the task ended with the agent alive, hands it back ({@link LivingAgents.keep});
 * between tasks it waits with its input open, and what it left running in the background
 * runs on. The workspace record's `agent` says so on every instance. The agent ends with
 * its container's release ({@link LivingAgents.end}), or when its runner exits.
 *
 * @example
 * ```ts
 * const agent = living.take(ws.id) ?? (await living.start(lease, owner, ws.id, input, livingKey(owner, input)))
 * // ... the task runs on it, with `stay`
 * living.keep(owner, ws.id, agent)
 * ```
 */
export class LivingAgents {
  private readonly byWorkspace = new Map<string, Living>()

  constructor(private readonly o: LivingAgentsOptions) {}

  /** The workspace's waiting agent, for a run (null: none, or it died). */
  take(wsId: string): AgentProcess | null {
    const l = this.byWorkspace.get(wsId)
    const agent = l?.agent ?? null
    if (!l || !agent) return null
    l.agent = null
    if (!agent.dead) return agent
    this.forget(wsId, l)
    return null
  }

  /** Start a living agent for `input` in the run's container (its conversation resumed from `input.resume`). */
  async start(lease: Lease, owner: string, wsId: string, input: RunnerInput, key: string): Promise<AgentProcess> {
    const { runtime, command } = requireEngine(this.o.engine)
    const agent = await startAgentProcess({
      runtime,
      command,
      logger: this.o.logger,
      cwd: WORKSPACE_DIR,
      lease,
      key,
      input,
      tokens: this.o.tokens,
    })
    this.track(owner, wsId, agent)
    return agent
  }

  /** A session task ended and its agent lives on (one started for it, or a warm one it took): it waits for the next follow-up. */
  keep(owner: string, wsId: string, agent: AgentProcess): void {
    if (agent.dead) return
    const known = this.byWorkspace.get(wsId)
    const l = known?.since === agent.since && known.owner === owner ? known : this.track(owner, wsId, agent)
    l.agent = agent
    l.tasks = agent.tasks
    agent.listen((event) => this.note(wsId, event))
    this.write(owner, wsId, l)
  }

  /** A `background_task` event of the workspace's agent (in a task or between two). */
  note(wsId: string, event: RunnerEvent): void {
    if (event.type !== 'background_task') return
    const l = this.byWorkspace.get(wsId)
    if (!l) return
    if (event.status === 'running')
      l.background.set(event.id, { id: event.id, kind: event.kind, description: event.description, since: event.at })
    else if (!l.background.delete(event.id)) return
    this.write(l.owner, wsId, l)
  }

  /** End the workspace's agent, if it has one waiting (its container is released, or the session stopped). */
  async end(wsId: string): Promise<void> {
    const l = this.byWorkspace.get(wsId)
    if (!l) return
    this.byWorkspace.delete(wsId)
    await l.agent?.end()
    await l.writes
  }

  /** Whether the workspace's agent waits between tasks here (alive, no task running on it). */
  lives(wsId: string): boolean {
    const agent = this.byWorkspace.get(wsId)?.agent
    return Boolean(agent && !agent.dead)
  }

  /** A new agent of the workspace: what an old one ran went with it. */
  private track(owner: string, wsId: string, agent: AgentProcess): Living {
    const l: Living = {
      owner,
      agent: null,
      since: agent.since,
      tasks: 0,
      background: new Map(),
      writes: this.byWorkspace.get(wsId)?.writes ?? Promise.resolve(),
    }
    this.byWorkspace.set(wsId, l)
    void agent.exited.then(() => {
      if (this.byWorkspace.get(wsId) === l) this.forget(wsId, l)
    })
    return l
  }

  private forget(wsId: string, l: Living): void {
    this.byWorkspace.delete(wsId)
    l.writes = l.writes.then(() =>
      this.o.workspaces
        .patch(l.owner, wsId, { agent: null })
        .then(() => {})
        .catch(() => {}),
    )
  }

  private write(owner: string, wsId: string, l: Living): void {
    const agent = { since: l.since, tasks: l.tasks, background: [...l.background.values()] }
    l.writes = l.writes.then(() =>
      this.o.workspaces
        .patch(owner, wsId, { agent })
        .then(() => {})
        .catch((err: unknown) =>
          this.o.logger.warn('could not record a living agent', { workspace: wsId, error: String(err) }),
        ),
    )
  }
}
