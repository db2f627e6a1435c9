/**
 * Steering from the console in a real browser (Debian's chromium via playwright-core)
 * against a real Berth on Podman running the real runner with the offline model: deny one
 * permission request with a message and approve the next, send a message while the agent
 * works, interrupt a task mid-tool.
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { systemClock } from '@berth/core'
import { findRepoRoot } from '@berth/testkit'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { launchBrowser, signIn, type Browser } from './browser.js'
import { RUNNER_BUNDLE } from './global-setup.js'

const TOUCH = '[[berth:tool Bash {"command":"touch /workspace/marker"}]]'
// Not a bare `sleep N`: Claude Code refuses those and asks for a background task.
const SLEEP = '[[berth:tool Bash {"command":"echo start; sleep 29.9; echo slept"}]]'

const SHOTS = join(findRepoRoot(), '.tmp', 'console-screenshots')

let t: Awaited<ReturnType<typeof taskServer>>
let browser: Browser

beforeAll(async () => {
  t = await taskServer('podman', {
    min: 1,
    max: 4,
    berth: { console: true, clock: systemClock, runner: { bundleDir: RUNNER_BUNDLE } },
  })
  browser = await launchBrowser()
  mkdirSync(SHOTS, { recursive: true })
})

afterAll(async () => {
  await browser?.close()
  await t?.s.close()
})

/** A signed-in page on the task's live view. */
async function openTask(taskId: string): Promise<Page> {
  const page = await browser.page()
  await signIn(page, t.s.url, t.token)
  await page.goto(`${t.s.url}/console#/tasks/${taskId}`)
  await page.getByTestId('task-status').waitFor()
  return page
}

const statusOf = (page: Page) => page.getByTestId('task-status')

describe('console steering', () => {
  it('shows each permission request with its tool and input: Deny with a message, a message to the agent, then Approve', async () => {
    const { task_id } = await t.submit({
      prompt: `Mark it. ${TOUCH} ${TOUCH} [[berth:text Marked.]]`,
      require_approval: ['Bash(touch:*)'],
    })
    const page = await openTask(task_id)
    const cards = page.getByRole('region', { name: 'Permission request: Bash' })

    const first = cards.nth(0)
    await first.waitFor({ timeout: 90_000 })
    // The task list shows which task waits for a person.
    const list = await browser.page()
    await signIn(list, t.s.url, t.token)
    await expect
      .poll(() => list.locator(`tr[data-task="${task_id}"] .needs-decision`).textContent())
      .toBe('needs a decision (1)')
    await list.close()
    expect(await first.locator('.tool-input').textContent()).toContain('"command": "touch /workspace/marker"')
    await expect.poll(() => page.locator('.waiting').textContent()).toContain('Waiting for your decision (1 request)')

    // While the agent waits it is running: the message box and Interrupt are there.
    const box = page.getByRole('form', { name: 'Message the agent' })
    expect(await box.isVisible()).toBe(true)
    expect(await page.getByRole('button', { name: 'Interrupt' }).isEnabled()).toBe(true)
    await box.getByLabel('Message the agent').fill('Only touch it once, please')
    await box.getByRole('button', { name: 'Send message' }).click()
    await expect.poll(() => box.getByRole('status').textContent()).toContain('Sent')

    await first.getByLabel('Message').fill('Not the first time')
    await page.screenshot({ path: join(SHOTS, 'permission-request.png') })
    await first.getByRole('button', { name: 'Deny' }).click()
    await expect.poll(() => first.locator('.approval-outcome').textContent()).toBe('Denied: Not the first time')
    expect(await first.getByRole('button', { name: 'Deny' }).count()).toBe(0)

    // The message shows as the person's once the agent takes it.
    const message = page.getByRole('region', { name: 'Message', exact: true })
    await expect.poll(() => message.locator('.prompt-text').textContent()).toBe('Only touch it once, please')

    // The second is approved with a changed input: the tool runs that instead.
    const second = cards.nth(1)
    await second.waitFor({ timeout: 60_000 })
    await second.getByText('Edit the input before approving').click()
    await second.getByLabel('Input (JSON)').fill('{ "command": "nope" ')
    await second.getByRole('button', { name: 'Approve' }).click()
    await expect.poll(() => second.getByRole('alert').textContent()).toContain('The input is not valid')
    await second.getByLabel('Input (JSON)').fill('{ "command": "touch /workspace/edited" }')
    await second.getByRole('button', { name: 'Approve' }).click()
    await expect.poll(() => second.locator('.approval-outcome').textContent()).toBe('Allowed')

    await expect.poll(() => statusOf(page).textContent(), { timeout: 60_000 }).toBe('completed')
    expect(await box.isVisible()).toBe(false)
    expect(await page.getByRole('button', { name: 'Interrupt' }).isDisabled()).toBe(true)
    // What the page showed is what happened.
    const events = await t.events(task_id)
    const decisions = events.filter((e) => e.type === 'permission_decision')
    expect(decisions.map((d) => [d.decision, d.message, d.by])).toEqual([
      ['deny', 'Not the first time', 'caller'],
      ['allow', null, 'caller'],
    ])
    expect(events.filter((e) => e.type === 'user_message').map((e) => e.text)).toContain('Only touch it once, please')
    const results = events.filter((e) => e.type === 'tool_result')
    expect(results.map((r) => r.is_error)).toEqual([true, false])
    // The allowed call ran with the edited input: its file is there, the agent's is not.
    const done = await t.api.tasks.get({ params: { id: task_id } })
    const { entries } = await t.api.workspaces.files.list({ params: { id: done.workspace_id! }, query: { path: '' } })
    expect(entries.map((f) => f.name)).toContain('edited')
    expect(entries.map((f) => f.name)).not.toContain('marker')

    // A finished task's page, loaded afresh, shows the outcomes without buttons.
    await page.reload()
    await expect.poll(() => cards.count()).toBe(2)
    expect(await page.locator('.approval-outcome').allTextContents()).toEqual(['Denied: Not the first time', 'Allowed'])
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0)
    await page.close()
  })

  it('Interrupt stops a task mid-tool: cancelled with INTERRUPTED', async () => {
    const { task_id } = await t.submit({ prompt: `Wait. ${SLEEP} [[berth:text Slept.]]` })
    const page = await openTask(task_id)
    await page.locator('details.tool .tool-name').waitFor({ timeout: 90_000 })
    await page.getByRole('button', { name: 'Interrupt' }).click()
    await expect.poll(() => statusOf(page).textContent(), { timeout: 30_000 }).toBe('cancelled')
    await expect.poll(() => page.locator('.error-line').textContent()).toContain('INTERRUPTED')
    expect(await page.getByRole('button', { name: 'Interrupt' }).isDisabled()).toBe(true)
    const task = await t.api.tasks.get({ params: { id: task_id } })
    expect(task).toMatchObject({ status: 'cancelled', error: { code: 'INTERRUPTED' } })
    await page.close()
  })
  it('shows the structured output a task was asked for', async () => {
    const task = await t.run({
      prompt: 'Where? [[berth:json {"city":"Oslo","population":709000}]]',
      output_schema: { type: 'object', required: ['city'] },
    })
    expect(task.status).toBe('completed')
    const page = await openTask(task.task_id)
    const block = page.getByLabel('Structured output')
    await block.waitFor()
    expect(JSON.parse((await block.locator('pre').textContent()) ?? '')).toEqual({ city: 'Oslo', population: 709000 })
    await page.close()
  })
})
