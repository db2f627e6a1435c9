/**
 * Notifications end to end: real tasks and playbook runs (Podman, the runner, the offline
 * model) notify real receivers: a node:http webhook receiver that checks the HMAC
 * signature, and an SMTP server that parses the mail.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { startReceiver, startSmtp, verifySignature, type Received } from './receivers.js'
import type { RouteInput, Task } from '@berth/client'
import { taskServer } from './tasks.helpers.js'

/** What a receiver got: a notification body. */
type Payload = { event: string; task?: Task; run?: Record<string, unknown>; at: string }

const SECRET = 'notify-secret-5e1f'
const BACKOFF_MS = 150

describe('notifications on podman', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let smtp: Awaited<ReturnType<typeof startSmtp>>
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-notify-'))
  const fsStorage = () => createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) })
  const closers: (() => Promise<void>)[] = []

  beforeAll(async () => {
    smtp = await startSmtp()
    t = await taskServer('podman', {
      berth: {
        // Real files, so a second server can start on what this one left (the restart test).
        dataDir,
        storage: fsStorage(),
        allowPrivateWebhooks: true,
        smtp: {
          host: '127.0.0.1',
          port: smtp.port,
          from: 'Berth <berth@example.test>',
          auth: smtp.auth,
          ignoreTLS: true,
        },
        notifications: { attempts: 3, backoffMs: BACKOFF_MS, timeoutMs: 1000 },
      },
    })
  })
  afterAll(async () => {
    for (const close of closers) await close()
    await t.s.close()
    await smtp.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
    rmSync(dataDir, { recursive: true, force: true })
  })

  async function receiver(respond?: Parameters<typeof startReceiver>[0]) {
    const r = await startReceiver(respond)
    closers.push(r.close)
    return r
  }
  async function integration(body: RouteInput<'integrations.create'>['body']): Promise<string> {
    return (await t.api.integrations.create({ body })).id
  }
  const removeIntegration = (id: string) => t.api.integrations.delete({ params: { id } })
  const payloads = (r: { received: Received[] }) => r.received.map((x) => JSON.parse(x.body) as Payload)
  /**
   * A positive signal for an absence: a `sentinel` receiver (scope: all) hears about a task
   * that runs after everything before it was dispatched, so a notification that should not
   * come would have been sent before this resolves.
   */
  async function afterLaterTask(): Promise<Task> {
    const sentinel = await receiver()
    const id = await integration({ type: 'webhook', config: { url: sentinel.url } })
    const later = await t.run({ prompt: 'Later. [[berth:text Later.]]' })
    await vi.waitFor(() => expect(payloads(sentinel).map((p) => p.task?.task_id)).toContain(later.task_id), 15_000)
    await removeIntegration(id)
    return later
  }

  it('a completed task notifies every enabled integration in scope with a signed { event, task, at }; others hear nothing', async () => {
    const other = (await t.api.profiles.create({ body: { name: 'Other', slug: 'other', api_key_id: t.keyId } })).id
    const [all, selected, elsewhere, disabled] = await Promise.all([receiver(), receiver(), receiver(), receiver()])
    const ids = [
      await integration({ type: 'webhook', config: { url: all.url, secret: SECRET } }),
      await integration({ type: 'webhook', config: { url: selected.url }, profile_ids: [t.profileId] }),
      await integration({ type: 'webhook', config: { url: elsewhere.url }, profile_ids: [other] }),
      await integration({ type: 'webhook', config: { url: disabled.url }, enabled: false }),
    ]
    const task = await t.run({ prompt: 'Say done. [[berth:text Done.]]' })
    expect(task.status).toBe('completed')

    await vi.waitFor(() => {
      expect(all.received).toHaveLength(1)
      expect(selected.received).toHaveLength(1)
    }, 15_000)
    const r = all.received[0]!
    expect(verifySignature(SECRET, r)).toBe(true)
    expect(r.headers['x-berth-event']).toBe('task.completed')
    expect(payloads(all)[0]).toEqual({
      event: 'task.completed',
      task: { ...task, status: 'completed' },
      at: expect.any(String),
    })
    expect(payloads(selected)[0]!.task?.task_id).toBe(task.task_id)
    expect(selected.received[0]!.headers['x-berth-signature']).toBeUndefined()
    const deliveries = await t.api.integrations.deliveries({ params: { id: ids[0]! } })
    expect(deliveries).toEqual({
      total: 1,
      next_cursor: null,
      deliveries: [
        expect.objectContaining({ event: 'task.completed', attempt: 1, status: 'succeeded', response_status: 200 }),
      ],
    })
    for (const id of ids) await removeIntegration(id)
    await afterLaterTask()
    expect(elsewhere.received).toHaveLength(0)
    expect(disabled.received).toHaveLength(0)
  })

  it('a failing receiver gets retries with backoff (5xx and timeouts) and never fails the task', async () => {
    const flaky = await receiver((_, i) => (i < 2 ? 500 : 200))
    const slow = await receiver((_, i) => (i === 0 ? 'hang' : 204))
    const broken = await receiver(() => 503)
    const ids = [
      await integration({ type: 'webhook', config: { url: flaky.url, secret: SECRET } }),
      await integration({ type: 'webhook', config: { url: slow.url } }),
      await integration({ type: 'webhook', config: { url: broken.url } }),
    ]
    const task = await t.run({ prompt: 'Loop. [[berth:turns 6]]', max_turns: 2 })
    expect(task).toMatchObject({ status: 'failed', error: { code: 'TURN_LIMIT_EXCEEDED' } })

    await vi.waitFor(() => {
      expect(flaky.received).toHaveLength(3)
      expect(slow.received).toHaveLength(2)
      expect(broken.received).toHaveLength(3)
    }, 15_000)
    // One notification, three attempts: same body, same delivery id, every one signed.
    expect(new Set(flaky.received.map((r) => r.body)).size).toBe(1)
    expect(new Set(flaky.received.map((r) => r.headers['x-berth-delivery'])).size).toBe(1)
    expect(flaky.received.every((r) => verifySignature(SECRET, r))).toBe(true)
    expect(payloads(flaky)[0]).toMatchObject({
      event: 'task.failed',
      task: { task_id: task.task_id, status: 'failed', error: { code: 'TURN_LIMIT_EXCEEDED' } },
    })
    const [a, b, c] = flaky.received.map((r) => r.at) as [number, number, number]
    expect(b - a).toBeGreaterThanOrEqual(BACKOFF_MS - 10)
    expect(c - b).toBeGreaterThanOrEqual(2 * BACKOFF_MS - 10)

    const attempts = async (id: string) => (await t.api.integrations.deliveries({ params: { id } })).deliveries
    await vi.waitFor(async () => expect(await attempts(ids[2]!)).toHaveLength(3), 15_000)
    expect((await attempts(ids[0]!)).map((d) => [d.attempt, d.status, d.response_status, d.will_retry])).toEqual([
      [3, 'succeeded', 200, false],
      [2, 'failed', 500, true],
      [1, 'failed', 500, true],
    ])
    expect((await attempts(ids[1]!)).map((d) => [d.attempt, d.status, d.error])).toEqual([
      [2, 'succeeded', null],
      [1, 'failed', 'timed out waiting for the receiver'],
    ])
    // Bounded: the third failure is the last.
    expect((await attempts(ids[2]!)).map((d) => [d.attempt, d.response_status, d.will_retry])).toEqual([
      [3, 503, false],
      [2, 503, true],
      [1, 503, true],
    ])
    // No fourth try: by the time a later task's notification arrives (after 1 + 2 backoffs
    // and a whole task), the fourth try (4 backoffs after the third) would have come.
    await afterLaterTask()
    expect(broken.received.filter((r) => JSON.parse(r.body).task.task_id === task.task_id)).toHaveLength(3)
    expect(await t.api.tasks.get({ params: { id: task.task_id } })).toMatchObject({
      status: 'failed',
      error: { code: 'TURN_LIMIT_EXCEEDED' },
    })
    // Failed deliveries are warnings, never errors of the server.
    expect(t.s.logs.filter((l) => l.includes('"level":"error"'))).toEqual([])
    expect(t.s.logs.some((l) => l.includes('notification not delivered'))).toBe(true)
    for (const id of ids) await removeIntegration(id)
  })

  it('a playbook run end notifies playbook_run.completed by webhook and by email, and not also as a task', async () => {
    const hook = await receiver()
    const ids = [
      await integration({ type: 'webhook', config: { url: hook.url, secret: SECRET } }),
      await integration({ type: 'email', config: { recipients: ['ops@example.test'] } }),
    ]
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Nightly', prompt: 'Run nightly. [[berth:text Nightly run done.]]' },
    })
    const { run_id } = await t.api.playbooks.run({ params: { id: pb.id } })
    await vi.waitFor(() => expect(hook.received).toHaveLength(1), 60_000)
    const [payload] = payloads(hook)
    expect(payload).toMatchObject({
      event: 'playbook_run.completed',
      run: {
        id: run_id,
        playbook_id: pb.id,
        status: 'completed',
        trigger: 'manual',
        session_id: expect.stringMatching(/^pb-/),
      },
    })
    expect(verifySignature(SECRET, hook.received[0]!)).toBe(true)

    await vi.waitFor(() => expect(smtp.mails.some((m) => m.text?.includes(run_id))).toBe(true), 15_000)
    const mail = smtp.mails.find((m) => m.text?.includes(run_id))!
    expect(mail.subject).toBe(`Berth: playbook run ${run_id} completed`)
    expect(mail.headers.get('x-berth-event')).toBe('playbook_run.completed')
    // The run's own task ended before the later task started: a task.completed for it would be here by now.
    const later = await afterLaterTask()
    expect(payloads(hook).map((p) => [p.event, p.task?.task_id ?? null])).toEqual([
      ['playbook_run.completed', null],
      ['task.completed', later.task_id],
    ])
    const taskMails = () => smtp.mails.filter((m) => m.headers.get('x-berth-event') === 'task.completed')
    await vi.waitFor(() => expect(taskMails().some((m) => m.text?.includes(later.task_id))).toBe(true), 15_000)
    expect(taskMails().map((m) => m.text?.includes(later.task_id))).toEqual([true])
    for (const id of ids) await removeIntegration(id)
  })

  it('after a restart, a run whose task ended while nothing listened is read from its task and ended (and notified) at start', async () => {
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Survivor', prompt: 'Finish. [[berth:text Finished.]]' },
    })
    const { run_id } = await t.api.playbooks.run({ params: { id: pb.id } })
    const runs = async () => (await t.api.playbooks.runs({ params: { id: pb.id } })).runs
    await vi.waitFor(async () => expect((await runs())[0]?.status).toBe('completed'), 60_000)

    // What a server stopped between the task's end and the run's update leaves behind, written
    // once this server has ended the run itself (the list shows the task's status before that):
    // two writers of one file at once can leave it torn.
    const storage = t.s.berth.storage
    const key = (await storage.getKeys(`playbook-runs:${pb.id}`)).find((k) => k.endsWith(run_id))!
    await vi.waitFor(async () => {
      expect(await storage.getItem(key)).toMatchObject({ status: 'completed' })
      expect(await storage.hasItem(`active-runs:${run_id}`)).toBe(false)
    }, 15_000)
    const run = (await storage.getItem(key)) as { owner_id: string; status: string }
    await storage.setItem(key, { ...run, status: 'running', finished_at: null })
    await storage.setItem(`active-runs:${run_id}`, { owner: run.owner_id, playbook_id: pb.id })
    // Read: the status comes from the task.
    expect((await runs())[0]).toMatchObject({ id: run_id, status: 'completed', finished_at: expect.any(String) })

    const hook = await receiver()
    await integration({ type: 'webhook', config: { url: hook.url, secret: SECRET } })
    const second = await startServer({ dataDir, storage: fsStorage(), allowPrivateWebhooks: true })
    closers.unshift(() => second.close())
    await second.berth.ready
    await vi.waitFor(() => expect(hook.received).toHaveLength(1), 15_000)
    expect(verifySignature(SECRET, hook.received[0]!)).toBe(true)
    expect(payloads(hook)[0]).toMatchObject({
      event: 'playbook_run.completed',
      run: { id: run_id, status: 'completed' },
    })
    expect(await storage.getItem(key)).toMatchObject({ status: 'completed' })
    expect(await storage.hasItem(`active-runs:${run_id}`)).toBe(false)
  })
})
