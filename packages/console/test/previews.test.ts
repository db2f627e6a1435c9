/**
 * Preview links on the console's session page, in a real browser (Debian's chromium via
 * playwright-core) against a real Berth on Podman: open a preview of the port the agent
 * serves, follow its link, revoke it.
 */
import { systemClock } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { serveInContainer } from '../../server/test/previews.helpers.js'
import { engineRuntime, uniquePoolName } from '../../server/test/pool.helpers.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { launchBrowser, signIn, type Browser } from './browser.js'
import { RUNNER_BUNDLE } from './global-setup.js'

let t: Awaited<ReturnType<typeof taskServer>>
let browser: Browser

beforeAll(async () => {
  t = await taskServer('podman', {
    min: 0,
    max: 2,
    sessionIdleMs: 600_000,
    berth: {
      console: true,
      clock: systemClock,
      runner: { bundleDir: RUNNER_BUNDLE },
      // No `network: none` here: the default policy (public), so the server reaches the container's port.
      pool: { image: engineRuntime('podman').info.image, min: 0, max: 2, name: uniquePoolName('console-previews') },
    },
  })
  browser = await launchBrowser()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await t?.s.close()
})

describe('console previews', () => {
  it("opens a preview of the session's port, links it, and revokes it", async () => {
    const task = await t.run({ mode: 'session', prompt: serveInContainer(8000) })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    await page.goto(`${t.s.url}/console#/tasks/${task.task_id}`)
    const panel = page.getByRole('region', { name: 'Previews' })
    await panel.getByText('No preview links.').waitFor()
    await panel.getByLabel('Port').fill('8000')
    await panel.getByRole('button', { name: 'Open preview' }).click()
    const link = panel.getByRole('link', { name: 'Port 8000' })
    await link.waitFor()
    const href = (await link.getAttribute('href'))!
    expect(href).toMatch(/\/preview\/[A-Za-z0-9_-]{43}\/$/)
    expect(await (await fetch(href)).text()).toBe('hello GET / auth= body=')
    await panel.getByRole('button', { name: 'Revoke the preview of port 8000' }).click()
    await panel.getByText('No preview links.').waitFor()
    expect((await fetch(href)).status).toBe(404)
    await page.close()
  }, 180_000)
})
