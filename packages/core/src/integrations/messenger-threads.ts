import type { OnceKeys } from '../coordination/port.js'
import { ENDED_TASK_STATUSES, isApiError, type PlaybookRun, type Task, type TaskStatus } from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import type { Logger } from '../ports/logger.js'
import { withoutIntegration, type ChannelIntegration } from '../ports/channel.js'
import type { DeliveryOutcome, OutgoingNotification } from '../ports/notifier.js'
import type { Store } from '../ports/store.js'
import type { EventBus, TaskBusMessage } from '../tasks/event-bus.js'
import type { IntegrationsService } from './integrations.js'
import type { ApprovalNotice } from './notifications.js'
import type { MessengerApi, MessengerMessage } from '../ports/messenger-api.js'
import { isProviderError } from '../ports/provider-error.js'
import type { PlaybooksService } from '../playbooks/playbooks.js'
import type { TasksService } from '../tasks/service.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'

export interface MessengerThreadsOptions {
  store: Store
  logger: Logger
  api: MessengerApi
  bus: EventBus
  tasks: TasksService
  workspaces: WorkspacesService
  playbooks: PlaybooksService
  integrations: IntegrationsService
  /** Where posting a follow-up's result is claimed across instances (default: this process's lock only). */
  once?: OnceKeys
}

/**
 * `messenger-threads:<integration>:<chat>:<message>`: a message the bot posted about a
 * playbook run (or a follow-up in its workspace). A reply to it continues that session.
 */
interface ThreadRecord {
  owner: string
  run_id: string | null
  playbook_id: string | null
  workspace_id: string
  session_id: string
}

/** `messenger-followups:<task>`: a follow-up task started by a reply, whose result goes back to the chat. */
interface FollowUpRecord extends ThreadRecord {
  integration_id: string
  chat_id: number
  /** The user's reply, which the result answers. */
  reply_to: number
}

const DONE: readonly TaskStatus[] = ENDED_TASK_STATUSES
/** The provider's limit is 4096 characters; leave room for the header and the hint. */
const MAX_TEXT = 4000
const HINT = 'Reply to this message to continue in its workspace.'

const threadKey = (integrationId: string, chatId: number, messageId: number) =>
  `messenger-threads:${integrationId}:${chatId}:${messageId}`

/** `messenger-approvals:<integration>:<chat>:<message>`: a permission request the bot posted; a reply decides it. */
interface ApprovalThread {
  owner: string
  task_id: string
  request_id: string
}

const approvalKey = (integrationId: string, chatId: number, messageId: number) =>
  `messenger-approvals:${integrationId}:${chatId}:${messageId}`

const APPROVAL_HINT = 'Reply “allow”, or “deny” and a reason for the agent.'

/**
 * A reply to a permission request: allow, deny (the rest of the text is the reason for the
 * agent), or neither (null).
 *
 * @example
 * ```ts
 * readDecision('deny: not on main') // { decision: 'deny', message: 'not on main' }
 * readDecision('yes')               // { decision: 'allow' }
 * readDecision('maybe later')       // null
 * ```
 */
export function readDecision(text: string): { decision: 'allow' | 'deny'; message?: string } | null {
  const m = /^\s*(allow|approve|yes|y|deny|reject|no|n)\b[\s:,.-]*(.*)$/is.exec(text)
  if (!m) return null
  const decision = /^(allow|approve|yes|y)$/i.test(m[1]!) ? 'allow' : 'deny'
  const reason = m[2]!.trim()
  return decision === 'deny' && reason ? { decision, message: reason } : { decision }
}

/** `text` cut to `max` characters, with an ellipsis when cut. */
function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`
}

/** A message of `header`, the body clipped to fit, and the footer. */
function compose(header: string, body: string | null | undefined, footer?: string): string {
  const room = MAX_TEXT - header.length - (footer ? footer.length + 2 : 0) - 2
  return [header, body ? clip(body, room) : null, footer].filter((x): x is string => Boolean(x)).join('\n\n')
}

/** What a finished task says: its result text, or its error. */
function outcomeText(task: Pick<Task, 'status' | 'result' | 'error'>): string | null {
  if (task.status === 'completed') return task.result?.text ?? null
  return task.error ? `${task.error.code}: ${task.error.error}` : null
}

/**
 * The messenger's notification channel and its threads. A permission request is posted
 * with its tool and input; a reply to it (“allow”, “deny <reason>”) decides it. Playbook results (and task
 * notifications) are posted to the bot's claimed chat with `sendMessage`; the id of each
 * message about a run is remembered with the run's `pb-…` session. A reply to such a
 * message continues that session: the workspace is claimed as a thread (it then shows in
 * the workspace list), the reply's text is submitted as a follow-up prompt, and the
 * follow-up's result is posted back as a reply (itself a message of the thread).
 *
 * @example
 * ```ts
 * const threads = new MessengerThreads({ store, logger, api, bus, tasks, workspaces, playbooks, integrations })
 * await threads.deliver(config, notification, integration) // posts to the claimed chat, remembers the message
 * ```
 */
export class MessengerThreads {
  private readonly lock = new KeyedMutex()
  private readonly inflight = new Set<Promise<unknown>>()

  constructor(private readonly o: MessengerThreadsOptions) {
    o.bus.subscribeAll((m) => this.onTaskMessage(m))
  }

  private track(p: Promise<unknown>): void {
    this.inflight.add(p)
    void p.finally(() => this.inflight.delete(p)).catch(() => {})
  }

  /** The `messenger` channel: one attempt at posting a notification to the claimed chat. */
  async deliver(
    config: Record<string, unknown>,
    n: OutgoingNotification,
    target?: ChannelIntegration,
  ): Promise<DeliveryOutcome> {
    if (!target) return withoutIntegration('messenger')
    const token = config.bot_token
    const chatId = config.chat_id
    if (typeof token !== 'string')
      return {
        ok: false,
        status: null,
        error: 'the integration has no bot token: set the bot up again',
        retryable: false,
      }
    if (typeof chatId !== 'number') {
      return {
        ok: false,
        status: null,
        error: 'no chat is claimed yet: get a code from POST /v1/integrations/messenger/claim and send it to the bot',
        retryable: false,
      }
    }
    const { run, approval } = n.payload as { run?: PlaybookRun; approval?: ApprovalNotice }
    let sent: { message_id: number }
    try {
      sent = await this.o.api.sendMessage(token, { chat_id: chatId, text: await this.textOf(target.owner_id, n) })
    } catch (err) {
      if (!isProviderError(err, 'messenger')) throw err
      return { ok: false, status: err.status, error: err.message, retryable: err.kind === 'unavailable' }
    }
    if (approval) {
      const { task_id, request_id } = approval
      await this.o.store.set<ApprovalThread>(approvalKey(target.id, chatId, sent.message_id), {
        owner: target.owner_id,
        task_id,
        request_id,
      })
    }
    if (run?.session_id && run.workspace_id) {
      await this.o.store.set<ThreadRecord>(threadKey(target.id, chatId, sent.message_id), {
        owner: target.owner_id,
        run_id: run.id,
        playbook_id: run.playbook_id,
        workspace_id: run.workspace_id,
        session_id: run.session_id,
      })
    }
    return { ok: true, status: 200 }
  }

  private async textOf(owner: string, n: OutgoingNotification): Promise<string> {
    const p = n.payload as { run?: PlaybookRun; task?: Task; approval?: ApprovalNotice }
    if (p.approval)
      return compose(
        `Task ${p.approval.task_id} asks to run ${p.approval.tool}`,
        JSON.stringify(p.approval.input, null, 2),
        APPROVAL_HINT,
      )
    if (p.run) {
      const pb = await this.o.playbooks.records.find(owner, p.run.playbook_id)
      const task = p.run.task_id ? await this.o.tasks.records.find(owner, p.run.task_id) : null
      const name = pb ? `“${pb.name}”` : p.run.playbook_id
      const code = p.run.error ? ` (${p.run.error.code})` : ''
      const body = task ? outcomeText(task) : (p.run.error?.error ?? null)
      return compose(`Playbook ${name} ${p.run.status}${code}`, body, p.run.workspace_id ? HINT : undefined)
    }
    if (p.task)
      return compose(
        `Task ${p.task.task_id} ${p.task.status}${p.task.error ? ` (${p.task.error.code})` : ''}`,
        outcomeText(p.task),
      )
    if (n.event === 'integration.test') return 'Berth test notification: this chat receives Berth results.'
    return `Berth: ${n.event}`
  }

  /**
   * A message in the claimed chat. A reply to one of the thread's messages continues the
   * run's session; anything else is ignored. Answers whether the message was part of a thread.
   */
  async onReply(owner: string, integrationId: string, botToken: string, message: MessengerMessage): Promise<boolean> {
    const parent = message.reply_to_message
    const text = message.text?.trim()
    if (!parent || !text) return false
    const chatId = message.chat.id
    const asked = await this.o.store.get<ApprovalThread>(approvalKey(integrationId, chatId, parent.message_id))
    if (asked && asked.owner === owner) {
      await this.decide(asked, text, (body) => this.say(botToken, chatId, body, message.message_id))
      return true
    }
    const thread = await this.o.store.get<ThreadRecord>(threadKey(integrationId, chatId, parent.message_id))
    if (!thread || thread.owner !== owner) return false
    const reply = (body: string) => this.say(botToken, chatId, body, message.message_id)
    const ws = await this.o.workspaces.bySession(owner, thread.session_id)
    if (!ws?.profile_id) {
      await reply(
        `That ${ws ? 'workspace’s profile' : 'workspace'} no longer exists, so the conversation cannot continue.`,
      )
      return true
    }
    if (!ws.thread_claimed) await this.o.workspaces.patch(owner, ws.id, { thread_claimed: true })
    let taskId: string
    try {
      ;({ task_id: taskId } = await this.o.tasks.submit(
        owner,
        { mode: 'session', profile_id: ws.profile_id, session_id: ws.session_id, prompt: text },
        { queueWhenFull: true },
      ))
    } catch (err) {
      if (!isApiError(err)) throw err
      await reply(`Could not continue: ${err.message}`)
      return true
    }
    await this.o.store.set<FollowUpRecord>(`messenger-followups:${taskId}`, {
      ...thread,
      integration_id: integrationId,
      chat_id: chatId,
      reply_to: message.message_id,
    })
    // The task may already have ended (a fast failure) before the record existed.
    await this.finishFollowUp(owner, taskId)
    return true
  }

  /** A reply to a permission request decides it, as the caller would over the API; the chat is told the outcome. */
  private async decide(asked: ApprovalThread, text: string, reply: (body: string) => Promise<unknown>): Promise<void> {
    const body = readDecision(text)
    if (!body) {
      await reply(`Not decided. ${APPROVAL_HINT}`)
      return
    }
    try {
      await this.o.tasks.steer.decide(asked.owner, asked.task_id, asked.request_id, body)
    } catch (err) {
      if (!isApiError(err)) throw err
      await reply(`Could not decide: ${err.message}`)
      return
    }
    await reply(body.decision === 'allow' ? 'Allowed: the agent goes on.' : 'Denied: the agent was told why.')
  }

  private onTaskMessage(m: TaskBusMessage): void {
    if (m.type !== 'task.status' || !DONE.includes(m.status) || !m.task.session_id?.startsWith('pb-')) return
    this.track(
      this.finishFollowUp(m.owner_id, m.task_id).catch((err) =>
        this.o.logger.warn('could not post a follow-up result', { task: m.task_id, error: String(err) }),
      ),
    )
  }

  /** Post a finished follow-up's result once (whoever takes its record posts it). */
  private async finishFollowUp(owner: string, taskId: string): Promise<void> {
    await this.lock.run(taskId, async () => {
      const key = `messenger-followups:${taskId}`
      const f = await this.o.store.get<FollowUpRecord>(key)
      if (!f || f.owner !== owner) return
      const task = await this.o.tasks.records.find(owner, taskId)
      if (task && !DONE.includes(task.status)) return
      // Several instances may finish it at once (their recover(), the task's end): one posts.
      if (this.o.once && !(await this.o.once.claimOnce(`messenger-followup:${taskId}`, 86_400_000))) return
      await this.o.store.remove(key)
      const target = await this.o.integrations.targetOf(owner, f.integration_id).catch(() => null)
      const token = target?.config.bot_token
      if (!task || typeof token !== 'string') return
      const header =
        task.status === 'completed' ? '' : `Follow-up ${task.status}${task.error ? ` (${task.error.code})` : ''}`
      const text = compose(header, outcomeText(task) ?? '(no text)', HINT)
      const sent = await this.say(token, f.chat_id, text, f.reply_to)
      if (sent !== null) {
        const { integration_id: _i, chat_id: _c, reply_to: _r, ...thread } = f
        await this.o.store.set<ThreadRecord>(threadKey(f.integration_id, f.chat_id, sent), thread)
      }
    })
  }

  /** Send a message; its id, or null (logged) when the provider refused or was unreachable. */
  async say(botToken: string, chatId: number, text: string, replyTo?: number): Promise<number | null> {
    try {
      const { message_id } = await this.o.api.sendMessage(botToken, {
        chat_id: chatId,
        text,
        reply_to_message_id: replyTo,
      })
      return message_id
    } catch (err) {
      if (!isProviderError(err, 'messenger')) throw err
      this.o.logger.warn('messenger message not sent', { chat: chatId, error: err.message.slice(0, 200) })
      return null
    }
  }

  /** After a restart: post the results of follow-ups that ended while nothing listened. */
  async recover(): Promise<void> {
    for (const key of await this.o.store.keys('messenger-followups:')) {
      const f = await this.o.store.get<FollowUpRecord>(key)
      if (f)
        await this.finishFollowUp(f.owner, key.slice('messenger-followups:'.length)).catch((err) =>
          this.o.logger.warn('could not post a follow-up result', { error: String(err) }),
        )
    }
  }

  /** Forget an integration's threads and the requests it posted (it was disconnected). */
  async forget(integrationId: string): Promise<void> {
    for (const kind of ['messenger-threads', 'messenger-approvals'])
      for (const key of await this.o.store.keys(`${kind}:${integrationId}:`)) await this.o.store.remove(key)
  }

  /** Wait for the result posts under way. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.inflight])
  }
}
