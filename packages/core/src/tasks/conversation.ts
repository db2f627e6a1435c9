/** A session's conversation kept across containers: tarred out into the store, put back before a follow-up. */
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { WorkspaceRecord } from '../workspaces/workspaces.js'
import { WORKSPACE_DIR } from './materialize.js'

/** The agent SDK's conversation state inside a workspace (the runner's config dir). */
const CONVERSATION_DIR = `${WORKSPACE_DIR}/.berth`
/** Conversation archives above this size are not kept (the follow-up starts afresh). */
const MAX_CONVERSATION_BYTES = 20 * 1024 * 1024

const key = (ws: WorkspaceRecord) => `ws-conversations:${ws.owner_id}:${ws.id}`

/**
 * The conversations of sessions without a volume: when their container is released the
 * conversation directory is kept in the store, and restored into the next container.
 *
 * @example
 * ```ts
 * await conversations.save(runtime, engineId, ws)
 * const resumed = await conversations.restore(runtime, newEngineId, ws) // false: start afresh
 * ```
 */
export class Conversations {
  constructor(
    private readonly store: Store,
    private readonly logger: Logger,
  ) {}

  /** Tar the conversation directory out of a session's container into the store. */
  async save(runtime: ContainerRuntime, engineId: string, ws: WorkspaceRecord): Promise<void> {
    const chunks: Uint8Array[] = []
    let size = 0
    const reader = (await runtime.getArchive(engineId, CONVERSATION_DIR)).getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      size += value.byteLength
      if (size > MAX_CONVERSATION_BYTES) {
        await reader.cancel()
        this.logger.warn('session conversation too large to keep', { workspace: ws.id, bytes: size })
        return
      }
      chunks.push(value)
    }
    await this.store.set(key(ws), { tar: Buffer.concat(chunks).toString('base64') })
  }

  /** Put a kept conversation back into a new container; false when none was kept. */
  async restore(runtime: ContainerRuntime, engineId: string, ws: WorkspaceRecord): Promise<boolean> {
    const saved = await this.store.get<{ tar: string }>(key(ws))
    if (!saved) return false
    await runtime.putArchive(engineId, WORKSPACE_DIR, new Uint8Array(Buffer.from(saved.tar, 'base64')))
    return true
  }
}
