import { api, describeError } from '../../api.js'
import { h, replace } from '../../dom.js'
import { age } from '../../format.js'
import { table } from './parts.js'

interface PoolStats {
  min: number
  max: number
  in_use: number
  idle: number
}
interface Container {
  id: string
  engine_id: string
  state: string
  owner_id: string | null
  workspace_id: string | null
  purpose: string | null
  created_at: string
  claimed_at: string | null
}
/** `/health`'s `engine`: the runtime, whether it answers, and the pool image's state. */
interface EngineState {
  name: string
  reachable: boolean
  last_error?: string
  image?: { ref: string; state: string }
}

/** One line for the engine's state, with the last error when it does not answer. */
function engineLine(engine: EngineState | undefined): string {
  if (!engine) return 'none (no container runtime)'
  return engine.reachable
    ? `${engine.name}: answering`
    : `${engine.name}: not answering${engine.last_error ? ` (${engine.last_error})` : ''}`
}

/**
 * The server and the warm pool: version, containers on the engine, min/max/in use/idle, and
 * every managed container with its owner, workspace, purpose and age.
 *
 * @example
 * ```ts
 * const pool = poolSections()
 * page.append(pool.health, pool.pool)
 * await pool.load()
 * ```
 */
export function poolSections(): { health: HTMLElement; pool: HTMLElement; load(): Promise<void> } {
  const healthEl = h('div', null, h('p', { class: 'muted' }, 'Loading…'))
  const poolEl = h('div')
  const loadHealth = async () => {
    try {
      const [health, pool, containers] = await Promise.all([
        api<{ ok: boolean; version: string; pool: PoolStats; engine?: EngineState }>('/health'),
        api<PoolStats>('/v1/pool', { admin: true }),
        api<{ containers: Container[]; total: number }>('/v1/pool/containers?limit=100', { admin: true }),
      ])
      replace(
        healthEl,
        h(
          'dl',
          { class: 'stats' },
          ...(
            [
              ['Server', health.ok ? 'ok' : 'down'],
              ['Version', health.version],
              ['Engine', engineLine(health.engine)],
              ['Image', health.engine?.image ? `${health.engine.image.ref} (${health.engine.image.state})` : '—'],
              ['Containers on the engine', `${pool.in_use + pool.idle} of ${pool.max}`],
            ] as const
          ).map(([k, v]) => h('div', { class: 'stat' }, h('dt', null, k), h('dd', null, v))),
        ),
      )
      replace(
        poolEl,
        h(
          'dl',
          { class: 'stats' },
          ...(
            [
              ['Min', pool.min],
              ['Max', pool.max],
              ['In use', pool.in_use],
              ['Idle', pool.idle],
            ] as const
          ).map(([k, v]) => h('div', { class: 'stat' }, h('dt', null, k), h('dd', { class: 'num' }, String(v)))),
        ),
        table(
          'Managed containers',
          ['Container', 'State', 'Owner', 'Workspace', 'Purpose', 'Age'],
          containers.containers.map((c) =>
            h(
              'tr',
              null,
              h('td', { class: 'mono small' }, c.id, h('div', { class: 'muted' }, c.engine_id.slice(0, 12))),
              h('td', null, h('span', { class: `badge status-${c.state === 'idle' ? 'queued' : 'running'}` }, c.state)),
              h('td', { class: 'mono small' }, c.owner_id ?? '—'),
              h('td', { class: 'mono small' }, c.workspace_id ?? '—'),
              h('td', null, c.purpose ?? '—'),
              h('td', { class: 'num', title: c.created_at }, age(c.created_at)),
            ),
          ),
          'No containers.',
        ),
      )
    } catch (err) {
      replace(poolEl, h('p', { class: 'error-text' }, describeError(err)))
    }
  }

  return {
    health: h(
      'section',
      { class: 'card', 'aria-labelledby': 'h-health' },
      h('h2', { id: 'h-health' }, 'Engine and server'),
      healthEl,
    ),
    pool: h('section', { class: 'card', 'aria-labelledby': 'h-pool' }, h('h2', { id: 'h-pool' }, 'Warm pool'), poolEl),
    load: loadHealth,
  }
}
