/** Live task messages across instances: this bus's messages published on the coordination's pub/sub, other instances' delivered here. */
import type { Coordination } from '../coordination/port.js'
import type { Logger } from '../ports/logger.js'
import type { EventLog } from '../workspaces/event-log.js'
import type { EventBus, TaskBusMessage } from './event-bus.js'

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
      this.chain = this.chain.then(() => this.deliver(env.message)).catch((err) => this.o.logger.warn('could not deliver a remote task message', { error: String(err) }))
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
      const missing = await this.o.eventLog.read(m.owner_id, m.workspace_id, { after: last, limit: m.event.seq - last - 1, taskId: m.task_id }).catch(() => [])
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
