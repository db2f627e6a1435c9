/** The engine tasks run on (runtime, pool, runner command, warm agents) and how a workspace without a container claims one from it. */
import { ApiError, type RunnerInput } from '@berth/contract'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import { diskLimits } from '../resources/environment-caps.js'
import type { EnvironmentsService } from '../resources/environments.js'
import type { ProfileRecord } from '../resources/profiles.js'
import type { ClaimRequest, Lease } from '../runtime/index.js'
import type { ContainerPool } from '../runtime/pool.js'
import { createWorkspaceVolume, workspaceVolumeName } from '../runtime/volumes.js'
import type { WorkspaceRecord } from '../workspaces/workspaces.js'
import { materialize, WORKSPACE_DIR, type MaterializeDeps } from './materialize.js'
import type { TaskRecord } from './task.js'
import { warmKey, type AgentProcess } from './agent-process.js'
import type { WarmAgents } from './warm-agents.js'

/** Where task containers come from and how the runner is started in them. */
export interface TaskEngine {
  runtime: ContainerRuntime
  pool: ContainerPool
  /** The command that starts the runner inside a container, e.g. `['berth-runner']`. */
  command: string[]
  /** Agents started ahead of tasks (see {@link WarmAgents}); without it every task starts its runner cold. */
  warmAgents?: WarmAgents
}

/**
 * The engine, or CONTAINER_FAILED for a server without a container runtime.
 *
 * @example
 * ```ts
 * const { runtime, pool, command } = requireEngine(options.engine)
 * ```
 */
export function requireEngine(engine: TaskEngine | undefined): TaskEngine {
  if (!engine)
    throw new ApiError('CONTAINER_FAILED', 'This server has no container runtime configured, so it cannot run tasks')
  return engine
}

export interface ClaimDeps {
  engine: TaskEngine
  environments: EnvironmentsService
  catalog: MaterializeDeps
}

/** What a run loads once and passes down: its task, workspace and profile. */
export interface RunPlan {
  task: TaskRecord
  workspace: WorkspaceRecord
  profile: ProfileRecord
  /** Told when the container claim waits (a full pool, the memory budget), to show on the task. */
  onWait?: ClaimRequest['onWait']
}

/** A workspace's new container. */
export interface Claimed {
  lease: Lease
  /** The workspace as the claim leaves it (its volume named); the run stores it with its `running` status. */
  workspace: WorkspaceRecord
  /** The runner input, when the claim had to resolve it to look for a warm agent (null: the run resolves it). */
  input: RunnerInput | null
  /** The agent that takes the task's prompt: a warm one, or the session's living one (null: start the runner). */
  agent: AgentProcess | null
  /** `agent` is the session's living agent, started for an earlier task (the run checks it still fits). */
  living?: boolean
  /** Starts a warm agent for the next task like this one: the run calls it at its first token or its end. */
  refill?: () => void
}

/**
 * Claim a container for a task's workspace. A new workspace of the default environment with
 * nothing to restore may get an agent that is already up (its runner input resolved here,
 * once, and handed on to the run); otherwise the pool's claim (a warm container, or one
 * made for the environment or the workspace's volume). The caller puts a kept
 * conversation back and asks the warm agents for one more like `input`.
 *
 * @example
 * ```ts
 * const { lease, workspace, input, agent } = await claimContainer(deps, plan, signal)
 * ```
 */
export async function claimContainer(deps: ClaimDeps, plan: RunPlan, signal: AbortSignal): Promise<Claimed> {
  const { runtime, pool, warmAgents: agents } = deps.engine
  const { task, profile } = plan
  let ws = plan.workspace
  const owner = task.owner_id
  const env = await deps.environments.resolve(owner, profile.environment_id, await endpointHosts(deps.catalog, profile))
  // Warm agents live in the default environment's containers: only its tasks may take one.
  let input: RunnerInput | null = null
  let agent: AgentProcess | null = null
  // A fork's copied files go in before the agent starts, so no warm agent for it either.
  if (Object.keys(env.spec).length === 0 && agents && !ws.persistent && !ws.sdk_session_id && !ws.seed_files) {
    input = await materialize(deps.catalog, task, profile, ws)
    agent = await agents.takeOrWait(warmKey(owner, input))
  }
  let lease: Lease
  if (agent) {
    await pool.assign(agent.lease.container.id, ws.id, task.mode)
    lease = agent.lease
  } else {
    // Parked agents give their containers back when a cold task needs the room (the pool's max or memory).
    if (agents && pool.room() === 0) await agents.evictOne()
    const volume = ws.persistent ? (ws.volume ?? workspaceVolumeName(ws.id)) : null
    // The session's volume gets the environment's disk size (the default environment's: the operator's default).
    const size = env.spec.limits?.diskBytes ?? diskLimits(deps.environments.caps, null).diskBytes
    if (volume)
      await createWorkspaceVolume(runtime, volume, { pool: pool.name, owner_id: owner, workspace_id: ws.id }, size)
    const mounts = volume ? [{ type: 'volume' as const, source: volume, target: WORKSPACE_DIR }] : []
    // Without a spec the claim takes a warm container (the default environment's); any
    // other environment, or a volume, gets a container made for the claim.
    const spec = { ...env.spec, ...(mounts.length && { mounts }) }
    lease = await pool.claim({
      owner_id: owner,
      workspace_id: ws.id,
      purpose: task.mode,
      priority: task.priority,
      signal,
      spec: Object.keys(spec).length ? spec : undefined,
      onWait: plan.onWait,
    })
    if (volume) ws = { ...ws, volume }
  }
  return { lease, workspace: ws, input, agent }
}

/** Hosts the agent must reach under an allowlist: the model endpoint (without a broker) and remote MCP servers. */
export async function endpointHosts(catalog: MaterializeDeps, profile: ProfileRecord): Promise<string[]> {
  const owner = profile.owner_id
  const hosts = new Set<string>()
  const credential = await catalog.apiKeys.resolve(owner, profile.api_key_id).catch(() => null)
  // Through the broker the model is reached over a socket, not the container's network.
  if (credential && credential.provider !== 'stub' && !catalog.broker)
    hosts.add(new URL(credential.base_url ?? 'https://api.anthropic.com').hostname)
  const servers = [
    ...Object.values(profile.mcp_servers),
    ...(await catalog.tools.forProfile(owner, profile.id)).map((t) => t.server),
  ]
  for (const server of servers) if (server.type !== 'stdio') hosts.add(new URL(server.url).hostname)
  return [...hosts].map((h) => h.replace(/^\[(.*)\]$/, '$1'))
}
