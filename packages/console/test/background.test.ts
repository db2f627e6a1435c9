/**
 * A session's living agent on the console's session page, in a real browser (Debian's
 * chromium via playwright-core) against a real Berth on Podman with the offline model: the
 * Background panel shows the server the agent left running (`run_in_background`), the
 * transcript shows it as a line (and a build's end), Stop waits while the page's task runs, shows the server's
 * 409 when another client's task runs, and empties the panel once it stops the session.
 * Under each finished task, Fork here forks at it and Rewind here takes the session back to
 * it, marking the later tasks; both show the server's refusal while a task runs.
 */
import { systemClock } from '@berth/core'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { backgroundServerPrompt, serverPort } from '../../server/test/background-work.helpers.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { launchBrowser, signIn, type Browser } from './browser.js'
import { RUNNER_BUNDLE } from './global-setup.js'

let t: Awaited<ReturnType<typeof taskServer>>
let browser: Browser

beforeAll(async () => {
  t = await taskServer('podman', {
    min: 1,
    max: 4,
    berth: { console: true, clock: systemClock, runner: { bundleDir: RUNNER_BUNDLE } },
  })
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  await t?.s.close()
})

/** A prompt whose Bash call waits until the file `name` shows up in the workspace: a task that runs until the test says. */
const waitFor = (name: string) =>
  `Wait. [[berth:tool Bash ${JSON.stringify({ command: `while [ ! -e ${name} ]; do sleep 0.2; done; echo went` })}]] [[berth:text Went.]]`

/** Let the task waiting for `name` go on. */
const release = (wsId: string, name: string) => t.api.files.upload(wsId, { name, data: new Uint8Array([1]) })

/** Click Stop and accept its confirmation. */
async function clickStop(page: Page): Promise<void> {
  page.once('dialog', (d) => void d.accept())
  await page.getByRole('region', { name: 'Background' }).getByRole('button', { name: 'Stop session' }).click()
}

it('the Background panel shows what the agent runs; Stop waits for a task, shows a 409, and empties it', async () => {
  const port = serverPort()
  // A build in the background too: it ends between the tasks, when the test says.
  const building = 'while [ ! -e build-go ]; do sleep 0.2; done; echo build-done'
  const build = `[[berth:tool Bash ${JSON.stringify({ command: building, run_in_background: true })}]]`
  const first = await t.run({ mode: 'session', prompt: `Build too. ${build} ${backgroundServerPrompt(port)}` })
  expect(first.status, JSON.stringify(first.error)).toBe('completed')
  const wsId = first.workspace_id!

  const page = await browser.page()
  await signIn(page, t.s.url, t.token)
  await page.goto(`${t.s.url}/console#/tasks/${first.task_id}`)
  const panel = page.getByRole('region', { name: 'Background' })
  const processes = panel.getByRole('list', { name: 'Background processes' })
  const stop = panel.getByRole('button', { name: 'Stop session' })
  // What the agent left running: what, its kind, for how long; the agent since when.
  await expect
    .poll(() => processes.locator('li').allTextContents(), { timeout: 60_000 })
    .toEqual([
      expect.stringMatching(/^while \[ ! -e build-go \].* local_bash · for \d+ (s|min)$/),
      expect.stringMatching(new RegExp(`listen\\(${port}\\).* local_bash · for \\d+ (s|min)$`)),
    ])
  // The build's end shows without a reload.
  await release(wsId, 'build-go')
  await expect.poll(() => processes.locator('li').count(), { timeout: 60_000 }).toBe(1)
  expect(await processes.textContent()).toContain(`listen(${port})`)
  expect(await panel.locator('.agent-line').textContent()).toMatch(/^Agent running for \d+ (s|min) · 1 task served$/)
  expect(await panel.locator('li time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/)
  // In the transcript: the background task's start, as one line.
  await expect
    .poll(() => page.locator('.ev.background').allTextContents())
    .toEqual([
      `▸ background: ${building} — running`,
      expect.stringMatching(new RegExp(`^▸ background: .*listen\\(${port}\\).* — running$`)),
    ])
  expect(await stop.isDisabled()).toBe(false)

  // Another client's follow-up runs: the server refuses the stop, and the page says why.
  const other = await t.submit({ mode: 'session', session_id: first.session_id!, prompt: waitFor('go-1') })
  await expect.poll(async () => (await t.api.tasks.get({ params: { id: other.task_id } })).status).toBe('running')
  await clickStop(page)
  await expect
    .poll(() => panel.getByRole('alert').textContent(), { timeout: 10_000 })
    .toMatch(/^Stop failed: .*\(CONFLICT\)$/)
  await release(wsId, 'go-1')
  expect((await t.waitDone(other.task_id)).status).toBe('completed')

  // A follow-up from this page: Stop waits until it has finished.
  await page.getByRole('textbox', { name: 'Follow-up prompt' }).fill(waitFor('go-2'))
  await page.getByRole('button', { name: 'Send' }).click()
  await expect.poll(() => page.getByTestId('task-status').textContent(), { timeout: 60_000 }).toBe('running')
  expect(await stop.isDisabled()).toBe(true)
  expect(await panel.textContent()).toContain('A task is running: Stop waits until it has finished.')
  await release(wsId, 'go-2')
  await expect.poll(() => page.getByTestId('task-status').textContent(), { timeout: 60_000 }).toBe('completed')
  await expect.poll(() => stop.isDisabled()).toBe(false)
  // Still the same agent, three tasks on, its server still running.
  await expect.poll(() => panel.locator('.agent-line').textContent()).toContain('3 tasks served')
  expect(await processes.textContent()).toContain(`listen(${port})`)

  await clickStop(page)
  await expect
    .poll(() => panel.locator('.agent-line').textContent(), { timeout: 30_000 })
    .toBe('No agent running: the next follow-up starts one and resumes the conversation.')
  expect(await processes.locator('li').count()).toBe(0)
  expect(await panel.getByRole('status').textContent()).toContain('Stopped')
  expect(await stop.isDisabled()).toBe(true)
  expect(await panel.locator('.form-error').textContent()).toBe('')
  expect(await t.api.workspaces.get({ params: { id: wsId } })).toMatchObject({ status: 'idle', agent: null })
  // The whole conversation again: the build's end opens the second task.
  await page.reload()
  await expect
    .poll(() => page.locator('.ev.background').allTextContents(), { timeout: 30_000 })
    .toContainEqual(expect.stringMatching(/^▸ background: while \[ ! -e build-go \].* — completed(: .+)?$/))
  await page.close()
}, 240_000)

it('Fork here forks at task 1; Rewind here takes the session back to task 1 and marks the later tasks', async () => {
  const write = (word: string) => `Word ${word}. [[berth:tool Bash {"command":"echo ${word} > state.txt"}]]`
  const one = await t.run({ mode: 'session', prompt: write('one') })
  const session_id = one.session_id!
  const wsId = one.workspace_id!
  await t.run({ mode: 'session', session_id, prompt: write('two') })
  const three = await t.run({ mode: 'session', session_id, prompt: write('three') })
  expect(three.status, JSON.stringify(three.error)).toBe('completed')

  const page = await browser.page()
  await signIn(page, t.s.url, t.token)
  await page.goto(`${t.s.url}/console#/tasks/${three.task_id}`)
  const conversation = page.getByRole('region', { name: 'Conversation' })
  await conversation.getByRole('button', { name: 'Rewind here, to task 3' }).waitFor({ timeout: 30_000 })
  expect(await conversation.getByRole('button', { name: /^Fork here/ }).count()).toBe(3)
  expect(await conversation.getByRole('button', { name: /^Rewind here/ }).count()).toBe(3)

  // While another client's task runs, both are refused, and the page says why.
  const busy = await t.submit({ mode: 'session', session_id, prompt: waitFor('go-3') })
  await expect.poll(async () => (await t.api.tasks.get({ params: { id: busy.task_id } })).status).toBe('running')
  await conversation.getByRole('button', { name: 'Fork here, at task 1' }).click()
  await expect
    .poll(() => conversation.getByRole('alert').allTextContents(), { timeout: 10_000 })
    .toContainEqual(expect.stringMatching(/^Fork failed: .*\(CONFLICT\)$/))
  page.once('dialog', (d) => void d.accept())
  await conversation.getByRole('button', { name: 'Rewind here, to task 1' }).click()
  await expect
    .poll(() => conversation.getByRole('alert').allTextContents(), { timeout: 10_000 })
    .toContainEqual(expect.stringMatching(/^Rewind failed: .*\(CONFLICT\)$/))
  await release(wsId, 'go-3')
  expect((await t.waitDone(busy.task_id)).status).toBe('completed')

  // Rewind here, to task 1: tasks 2, 3 and the other client's 4 are marked, and offer nothing any more.
  page.once('dialog', (d) => void d.accept())
  await conversation.getByRole('button', { name: 'Rewind here, to task 1' }).click()
  await expect
    .poll(() => conversation.locator('.rewind-line').textContent(), { timeout: 30_000 })
    .toBe('↶ Rewound to task 1: 3 later tasks undone')
  expect(
    await conversation
      .locator('.task-block.rewound')
      .evaluateAll((els) => els.map((e) => e.getAttribute('data-task-n'))),
  ).toEqual(['2', '3', '4'])
  expect(await conversation.locator('.rewound-note').allTextContents()).toEqual(
    Array(3).fill('Rewound: the session went back to task 1.'),
  )
  expect(await conversation.getByRole('button', { name: /^Rewind here/ }).count()).toBe(1)
  expect((await t.api.tasks.get({ params: { id: three.task_id } })).rewound_at).toEqual(expect.any(String))
  expect((await t.api.tasks.get({ params: { id: one.task_id } })).rewound_at).toBeNull()

  // Fork here, at task 1: the new session, forked there.
  await conversation.getByRole('button', { name: 'Fork here, at task 1' }).click()
  await page.waitForURL((u) => /^#\/sessions\/ws_/.test(u.hash))
  const forkId = new URL(page.url()).hash.replace('#/sessions/', '')
  await expect.poll(() => page.locator('main').textContent(), { timeout: 30_000 }).toContain('Forked from')
  expect((await t.api.workspaces.get({ params: { id: forkId } })).forked_from).toEqual({
    workspace_id: wsId,
    task_id: one.task_id,
  })
  await page.close()
}, 240_000)
