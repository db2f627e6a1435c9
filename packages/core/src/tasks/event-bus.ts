/** A task's live messages: fanned out to subscribers in this process, and relayed to and from the other instances. */
import type { Task, TranscriptEvent } from '@berth/contract'
import type { Coordination } from '../coordination/port.js'
import type { Logger } from '../ports/logger.js'
import type { EventLog } from '../workspaces/event-log.js'

/** What subscribers of a task receive, live (in this process, and relayed between instances). */
export type TaskBusMessage =
  | { type: 'task.status'; task_id: string; status: Task['status']; task: Task; owner_id: string }
  | {
      type: 'task.event'
      task_id: string
      event: TranscriptEvent
      owner_id?: string
      workspace_id?: string
      /** The task's profile (services that notify its integrations read it). */
      profile_id?: string
    }

type Listener = (message: TaskBusMessage) => void

/**
 * In-process fan-out of task status changes and transcript events to subscribers (the
 * WebSocket). A listener that throws is dropped, never the publisher.
 *
 * @example
 * ```ts
 * const off = bus.subscribe('task_1', (m) => console.log(m.type))
 * bus.publish({ type: 'task.event', task_id: 'task_1', event })
 * off()
 * ```
 */
export class EventBus {
  private readonly listeners = new Map<string, Set<Listener>>()
  private readonly everything = new Set<Listener>()
  /** Where this process's messages also go (other instances' buses). */
  private relays: Listener[] = []

  /** Also send every message published here to `relay` (the other instances). */
  relayTo(relay: Listener): void {
    this.relays.push(relay)
  }

  /**
   * A message published on another instance: to this process's subscribers of its task
   * only (services that react to any task run where the task runs), never relayed again.
   */
  deliverRemote(message: TaskBusMessage): void {
    this.toTaskListeners(message)
  }

  subscribe(taskId: string, listener: Listener): () => void {
    const set = this.listeners.get(taskId) ?? new Set()
    this.listeners.set(taskId, set)
    set.add(listener)
    return () => {
      set.delete(listener)
      if (set.size === 0) this.listeners.delete(taskId)
    }
  }

  /**
   * Every message of every task, for services that react to any task (notifications,
   * playbook runs). Unlike a task subscriber, such a listener is kept when it throws.
   */
  subscribeAll(listener: Listener): () => void {
    this.everything.add(listener)
    return () => this.everything.delete(listener)
  }

  publish(message: TaskBusMessage): void {
    for (const listener of this.everything) {
      try {
        listener(message)
      } catch {
        // A service's listener must not stop the task or the other listeners.
      }
    }
    this.toTaskListeners(message)
    for (const relay of this.relays) relay(message)
  }

  private toTaskListeners(message: TaskBusMessage): void {
    for (const listener of this.listeners.get(message.task_id) ?? []) {
      try {
        listener(message)
      } catch {
        this.listeners.get(message.task_id)?.delete(listener)
      }
    }
  }
}

/** The channel every instance's task messages go on. */
export const TASK_CHANNEL = 'tasks'

/** A message on the channel: who published it. */
interface Envelope {
  origin: string
  message: TaskBusMessage
}

/** Tasks whose last delivered seq is kept (oldest forgotten first). */
const MAX_TRACKED = 10_000

/**
 * Bridges an instance's {@link EventBus} to the others: every message published here goes
 * on the pub/sub channel; a message from another instance goes to this instance's
 * subscribers of its task, events once each and in order (by `seq`; a gap is read from
 * the shared event log first).
 *
 * @example
 * ```ts
 * const remote = new RemoteEvents({ coordination, bus, eventLog, logger })
 * await remote.start()
 * ```
 */
export class RemoteEvents {
  private readonly lastSeq = new Map<string, number>()
  private off: (() => Promise<void>) | null = null
  /** Deliveries in order: a gap's read finishes before the next message is delivered. */
  private chain: Promise<void> = Promise.resolve()

  constructor(private readonly o: { coordination: Coordination; bus: EventBus; eventLog: EventLog; logger: Logger }) {}

  async start(): Promise<void> {
    const { coordination, bus } = this.o
    this.off = await coordination.pubsub.subscribe<Envelope>(TASK_CHANNEL, (env) => {
      if (env.origin === coordination.instanceId) return
      this.chain = this.chain
        .then(() => this.deliver(env.message))
        .catch((err) => this.o.logger.warn('could not deliver a remote task message', { error: String(err) }))
    })
    bus.relayTo((message) => {
      if (this.off === null) return
      coordination.pubsub.publish<Envelope>(TASK_CHANNEL, { origin: coordination.instanceId, message }).catch(() => {})
    })
  }

  async close(): Promise<void> {
    const off = this.off
    this.off = null
    await off?.().catch(() => {})
  }

  private async deliver(m: TaskBusMessage): Promise<void> {
    const bus = this.o.bus
    if (m.type !== 'task.event') return bus.deliverRemote(m)
    const last = this.lastSeq.get(m.task_id)
    if (last !== undefined && m.event.seq <= last) return
    if (last !== undefined && m.event.seq > last + 1 && m.owner_id && m.workspace_id) {
      // Missed on the channel: the log has them (in the shared store).
      const missing = await this.o.eventLog
        .read(m.owner_id, m.workspace_id, { after: last, limit: m.event.seq - last - 1, taskId: m.task_id })
        .catch(() => [])
      for (const event of missing) if (event.seq < m.event.seq) bus.deliverRemote({ ...m, event })
    }
    this.track(m.task_id, m.event.seq)
    bus.deliverRemote(m)
  }

  private track(taskId: string, seq: number): void {
    this.lastSeq.delete(taskId)
    this.lastSeq.set(taskId, seq)
    if (this.lastSeq.size > MAX_TRACKED) this.lastSeq.delete(this.lastSeq.keys().next().value!)
  }
}
