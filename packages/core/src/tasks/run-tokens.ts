/**
 * Capability tokens: what a run inside a container holds instead of credentials. See
 * `run-grants.ts` for what a token is worth, and docs/CREDENTIALS.md.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { Store } from '../ports/store.js'

const PREFIX = 'bct_'

/**
 * Capability tokens: `bct_<subject>.<mac>`, where the subject is a task id (a cold run) or a
 * warm agent's id (bound to its task when the task takes it) and the MAC is an HMAC-SHA256
 * with the deployment's key, so every instance sharing the key checks them without a lookup
 * of the token itself, and a restart keeps them valid while their task is.
 *
 * @example
 * ```ts
 * const tokens = new RunTokens(key)
 * tokens.subject(tokens.issue('task_1')) // 'task_1'
 * ```
 */
export class RunTokens {
  private readonly key: Buffer

  constructor(deploymentKey: Uint8Array) {
    // A key of its own, derived: the encryption key itself never signs anything.
    this.key = createHmac('sha256', deploymentKey).update('berth run capability tokens v1').digest()
  }

  issue(subject: string): string {
    return `${PREFIX}${subject}.${this.mac(subject)}`
  }

  /** The token's subject, or null when it is not one of ours. */
  subject(token: string): string | null {
    if (!token.startsWith(PREFIX)) return null
    const dot = token.lastIndexOf('.')
    if (dot < 0) return null
    const subject = token.slice(PREFIX.length, dot)
    const given = Buffer.from(token.slice(dot + 1))
    const want = Buffer.from(this.mac(subject))
    return given.length === want.length && timingSafeEqual(given, want) ? subject : null
  }

  /** A fresh subject for a warm agent (its token is issued before any task exists). */
  static warmSubject(): string {
    return `warm_${randomBytes(12).toString('hex')}`
  }

  private mac(subject: string): string {
    return createHmac('sha256', this.key).update(subject).digest('base64url')
  }
}

/** The store key binding a warm agent's subject to the task that took it. */
export function subjectKey(subject: string): string {
  return `run-subjects:${subject}`
}

/** Bind a warm agent's subject to the task that took it: from now on its token speaks for that task. */
export function bindSubject(store: Store, subject: string, taskId: string): Promise<void> {
  return store.set(subjectKey(subject), { task_id: taskId })
}
