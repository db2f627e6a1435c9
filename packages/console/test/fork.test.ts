/**
 * Forking from the console in a real browser (Debian's chromium via playwright-core)
 * against a real Berth on Podman with the offline model: Fork on a session's page opens
 * the new session, whose first prompt remembers the original's conversation.
 */
import { systemClock } from '@berth/core'
import { afterAll, beforeAll, expect, it } from 'vitest'
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

it('Fork on a session’s page opens the new session; its first prompt remembers the original', async () => {
  const first = await t.run({ mode: 'session', prompt: 'Remember the word heron. [[berth:text noted]]' })
  expect(first.status).toBe('completed')
  const page = await browser.page()
  await signIn(page, t.s.url, t.token)
  await page.goto(`${t.s.url}/console#/tasks/${first.task_id}`)
  await page.getByTestId('task-status').waitFor()
  await page.getByRole('button', { name: 'Fork', exact: true }).click()
  await page.waitForURL((u) => /^#\/sessions\/ws_/.test(u.hash))
  const forkId = new URL(page.url()).hash.replace('#/sessions/', '')
  expect(forkId).not.toBe(first.workspace_id)
  await expect.poll(() => page.locator('main').textContent(), { timeout: 30_000 }).toContain('Forked from')

  await page.getByRole('textbox', { name: 'Follow-up prompt' }).fill('What did I say first? [[berth:recall]]')
  await page.getByRole('button', { name: 'Send' }).click()
  await page.waitForURL((u) => u.hash.startsWith('#/tasks/task_'))
  const taskId = new URL(page.url()).hash.replace('#/tasks/', '')
  await expect
    .poll(() => page.getByRole('region', { name: 'Result' }).last().textContent(), { timeout: 90_000 })
    .toContain('The first prompt was: Remember the word heron.')
  expect((await t.api.tasks.get({ params: { id: taskId } })).workspace_id).toBe(forkId)

  // The sessions list opens the fork at its own newest task now.
  await page.getByRole('link', { name: 'Sessions' }).click()
  const fork = await t.api.workspaces.get({ params: { id: forkId } })
  await page.getByRole('button', { name: new RegExp(fork.session_id) }).click()
  await page.waitForURL((u) => u.hash === `#/tasks/${taskId}`)
  await page.close()
}, 180_000)
