/** `TasksOptions`: what the tasks service is built from. */
import type { AuditLog } from '../audit/log.js'
import type { Coordination, OnceKeys } from '../coordination/port.js'
import type { CallerCaps } from '../limits/caller-caps.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Metrics } from '../ports/metrics.js'
import type { Store } from '../ports/store.js'
import type { EnvironmentsService } from '../resources/environments.js'
import type { ProfilesService } from '../resources/profiles.js'
import type { Usage } from '../usage/budgets.js'
import type { Checkpoints } from '../workspaces/checkpoints.js'
import type { EventLog } from '../workspaces/event-log.js'
import type { WorkspaceSnapshots } from '../workspaces/workspace-snapshots.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import type { TaskEngine } from './engine.js'
import type { EventBus } from './event-bus.js'
import type { MaterializeDeps } from './materialize.js'
import type { TimeLimitSettings } from './time-limit.js'

export interface TasksOptions {
  store: Store
  clock: Clock
  logger: Logger
  /** Where task starts, ends, queue depth and first tokens are observed (default none). */
  metrics?: Metrics
  eventLog: EventLog
  bus: EventBus
  slots: ConcurrencySlots
  /** Per-caller caps on running workspaces and pool share (default none). */
  callers?: CallerCaps | undefined
  profiles: ProfilesService
  environments: EnvironmentsService
  workspaces: WorkspacesService
  catalog: MaterializeDeps
  engine?: TaskEngine | undefined
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** After a restart, how long to wait for a runner still at work to write its result (default 30 s). */
  recoveryGraceMs?: number
  /** Keeps the files of a workspace without a volume when its container is released. */
  snapshots?: WorkspaceSnapshots | undefined
  /** Keeps every finished session task's files and conversation (default none). */
  checkpoints?: Checkpoints | undefined
  /** What instances share (default: this process alone). */
  coordination?: Coordination | undefined
  /** Single-use keys (approvals' decisions, lost tasks' claims); default the coordination's. */
  once?: OnceKeys | undefined
  /** Wall-time limits of a task once it runs: the default, and the most a submit may ask (seconds; null: none). */
  timeLimit?: TimeLimitSettings | undefined
  /** Records approvals decided. */
  audit?: AuditLog | undefined
  /** Where task ends add their usage and metered results are read from; the limits a submit is checked against. */
  usage?: Usage | undefined
}
