import type { Task, TranscriptEvent } from '@berth/contract'

/** What subscribers of a task receive, live (in this process, and relayed between instances). */
export type TaskBusMessage =
  | { type: 'task.status'; task_id: string; status: Task['status']; task: Task; owner_id: string }
  | { type: 'task.event'; task_id: string; event: TranscriptEvent; owner_id?: string; workspace_id?: string }

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
    let set = this.listeners.get(taskId)
    if (!set) this.listeners.set(taskId, (set = new Set()))
    set.add(listener)
    return () => {
      set!.delete(listener)
      if (set!.size === 0) this.listeners.delete(taskId)
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
