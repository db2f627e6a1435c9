/**
 * The console in a real browser (Debian's chromium via playwright-core) against a real
 * Berth on Podman running the real runner with the offline model: sign in, submit, watch
 * the tool call and the result stream in, cancel, sessions with follow-ups and files, and
 * the task page's layout at desktop and phone widths.
 */
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { systemClock } from '@berth/core'
import { findRepoRoot } from '@berth/testkit'
import type { Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN } from '../../server/test/helpers.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { launchBrowser, signIn, type Browser } from './browser.js'
import { RUNNER_BUNDLE } from './global-setup.js'

const SHOTS = join(findRepoRoot(), '.tmp', 'console-screenshots')

let t: Awaited<ReturnType<typeof taskServer>>
let browser: Browser

beforeAll(async () => {
  t = await taskServer('podman', {
    min: 1,
    max: 6,
    berth: { console: true, clock: systemClock, runner: { bundleDir: RUNNER_BUNDLE } },
  })
  browser = await launchBrowser()
  mkdirSync(SHOTS, { recursive: true })
})

afterAll(async () => {
  await browser?.close()
  await t?.s.close()
})

/** Submit through the console's form and land on the task page; resolves the task id. */
async function submitFromForm(
  page: Page,
  prompt: string,
  opts: { session?: boolean; maxTurns?: number } = {},
): Promise<string> {
  await page.getByRole('link', { name: 'New task' }).first().click()
  // The form, not the task list's own Profile filter still on screen until the hash changes.
  await page.getByRole('heading', { name: 'New task' }).waitFor()
  await page.getByLabel('Profile').selectOption(t.profileId)
  if (opts.session) await page.getByLabel(/Session/).check()
  await page.getByLabel('Prompt', { exact: true }).fill(prompt)
  if (opts.maxTurns) await page.getByLabel('Max turns').fill(String(opts.maxTurns))
  await page.getByRole('button', { name: 'Submit task' }).click()
  await page.waitForURL(/#\/tasks\/task_/)
  return new URL(page.url()).hash.replace('#/tasks/', '')
}

const statusOf = (page: Page) => page.getByTestId('task-status')

describe('console', () => {
  it('serves the page offline with a strict CSP, and signs in with a key kept out of the URL', async () => {
    const res = await fetch(`${t.s.url}/console`)
    expect(res.status).toBe(200)
    const csp = res.headers.get('content-security-policy') ?? ''
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).not.toContain('unsafe-inline')
    const html = await res.text()
    // Nothing from another host: every src/href is relative.
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//)

    const page = await browser.page()
    const violations: string[] = []
    page.on('console', (m) => m.type() === 'error' && violations.push(m.text()))
    await page.goto(`${t.s.url}/console`)
    await page.getByLabel('Caller key').fill('berth_sk_wrong')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('UNAUTHORIZED')

    await page.getByLabel('Caller key').fill(t.token)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { name: 'Tasks' }).waitFor()
    expect(await page.evaluate(() => sessionStorage.getItem('berth.console.key'))).toBe(t.token)
    expect(await page.evaluate(() => localStorage.length)).toBe(0)
    expect(page.url()).not.toContain(t.token)
    expect(await page.evaluate(() => history.length)).toBeGreaterThan(0)
    // The caller is no operator: no admin view.
    expect(await page.getByRole('link', { name: 'Operator' }).count()).toBe(0)
    // The live socket is up (its URL carries the token; the page's never does).
    await expect.poll(() => page.locator('.conn').textContent()).toContain('live')
    expect(violations.filter((v) => /Content Security Policy/i.test(v))).toEqual([])
    // Signing out forgets the key (and whatever else the console kept in the tab).
    await page.evaluate(() => sessionStorage.setItem('berth.console.profile', 'prof_x'))
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('Caller key').waitFor()
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0)
    await page.close()
  })

  it('submits a stub task and shows the tool call and the result live, as they happen', async () => {
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    const marker = `console-marker-${Date.now()}`
    const id = await submitFromForm(
      page,
      `Run it [[berth:tool Bash {"command":"echo ${marker}"}]] [[berth:slow 120]] [[berth:text All done here.]]`,
    )

    // The tool call shows up while the task still runs: streamed, not loaded afterwards.
    const seen = await page.waitForFunction(
      () => {
        const tool = document.querySelector('details.tool .tool-name')
        return tool
          ? { tool: tool.textContent, status: document.querySelector('[data-testid=task-status]')?.textContent }
          : null
      },
      undefined,
      { timeout: 90_000 },
    )
    const atToolCall = (await seen.jsonValue()) as { tool: string; status: string }
    expect(atToolCall.tool).toBe('Bash')
    expect(atToolCall.status).toBe('running')

    await expect
      .poll(() => page.locator('details.tool pre.tool-output').textContent(), { timeout: 90_000 })
      .toContain(marker)
    await page.getByRole('region', { name: 'Result' }).waitFor({ timeout: 90_000 })
    expect(await page.getByRole('region', { name: 'Result' }).textContent()).toContain('All done here.')
    await expect.poll(() => statusOf(page).textContent(), { timeout: 30_000 }).toBe('completed')

    // Every event rendered once, in order: the page's text equals the log's tokens.
    const events = await t.events(id)
    const tokens = events
      .filter((e) => e.type === 'token')
      .map((e) => String(e.text))
      .join('')
    const rendered = (await page.locator('.ev.text').allTextContents()).join('')
    expect(rendered).toBe(tokens)
    expect(Number(await page.locator('.transcript').getAttribute('data-last-seq'))).toBe(events.at(-1)!.seq)
    expect(await page.locator('details.tool').count()).toBe(events.filter((e) => e.type === 'tool_call').length)

    // The list shows it, with its cost and turns.
    await page.getByRole('link', { name: 'Tasks' }).first().click()
    const row = page.locator(`tr[data-task="${id}"]`)
    await row.waitFor()
    expect(await row.textContent()).toContain('completed')
    expect(await row.textContent()).toContain('$')
    await page.close()
  })

  it('keeps up with a fast stream: every token once, in order', async () => {
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    const words = Array.from({ length: 400 }, (_, i) => `w${i}`).join(' ')
    // Two milliseconds per delta: about 500 deltas a second.
    const id = await submitFromForm(page, `Stream fast [[berth:slow 2]] [[berth:text ${words}]]`)
    // Count layout shifts while it streams (the Layout Instability API).
    await page.evaluate(() => {
      const w = window as unknown as { shift: number }
      w.shift = 0
      new PerformanceObserver((list) => {
        for (const e of list.getEntries() as unknown as { value: number; hadRecentInput: boolean }[])
          if (!e.hadRecentInput) w.shift += e.value
      }).observe({ type: 'layout-shift' })
    })
    await page.getByRole('region', { name: 'Result' }).waitFor({ timeout: 90_000 })
    await expect.poll(() => statusOf(page).textContent(), { timeout: 30_000 }).toBe('completed')
    const events = (after = 0) => t.api.tasks.events({ params: { id }, query: { limit: 100, after } })
    const first = await events()
    const all = [...first.events]
    while (all.length < first.total) all.push(...(await events(all.at(-1)!.seq)).events)
    const tokens = all.filter((e) => e.type === 'token')
    expect(tokens.length).toBeGreaterThan(50)
    expect((await page.locator('.ev.text').allTextContents()).join('')).toBe(tokens.map((e) => e.text).join(''))
    expect(Number(await page.locator('.transcript').getAttribute('data-last-seq'))).toBe(all.at(-1)!.seq)
    // Nothing already on screen moved while tokens streamed in.
    expect(await page.evaluate(() => (window as unknown as { shift: number }).shift)).toBeLessThan(0.05)
    await page.close()
  })

  it('updates the task list live over the WebSocket', async () => {
    expect((await t.run({ prompt: 'A finished one' })).status).toBe('completed')
    const sub = await t.submit({ prompt: 'Wait [[berth:slow 3000]] [[berth:text a b c d e f]]' })
    const page = await browser.page()
    let listReads = 0
    page.on('request', (r) => new URL(r.url()).pathname === '/v1/tasks' && r.method() === 'GET' && listReads++)
    await signIn(page, t.s.url, t.token)
    const row = page.locator(`tr[data-task="${sub.task_id}"]`)
    await expect.poll(() => row.textContent(), { timeout: 60_000 }).toMatch(/queued|starting|running/)
    const reads = listReads
    await t.api.tasks.cancel({ params: { id: sub.task_id } })
    await expect.poll(() => row.textContent(), { timeout: 10_000 }).toContain('cancelled')
    // Pushed by the socket: the list was not read again to learn it.
    expect(listReads).toBe(reads)
    // Filtered by status, only cancelled tasks are listed.
    await page.getByText('A finished one').waitFor()
    await page.getByLabel('Status').selectOption('cancelled')
    await page.waitForURL(/status=cancelled/)
    await expect.poll(() => page.locator('tr[data-task]').count()).toBeGreaterThan(0)
    const statuses = await page.locator('tr[data-task] .badge').allTextContents()
    expect(new Set(statuses)).toEqual(new Set(['cancelled']))
    expect(await page.getByText('A finished one').count()).toBe(0)
    await page.close()
  })

  it('submits with the keyboard alone', async () => {
    const page = await browser.page()
    await page.goto(`${t.s.url}/console`)
    // The key field has focus; Enter submits the form.
    await page.keyboard.type(t.token)
    await page.keyboard.press('Enter')
    await page.getByRole('heading', { name: 'Tasks' }).waitFor()
    await page.goto(`${t.s.url}/console#/new`)
    await page.getByRole('heading', { name: 'New task' }).waitFor()
    // The prompt has focus; Ctrl+Enter submits.
    await page.keyboard.type('Typed with the keyboard')
    await page.keyboard.press('Control+Enter')
    await page.waitForURL(/#\/tasks\/task_/)
    await page.getByRole('region', { name: 'Result' }).waitFor({ timeout: 90_000 })
    await page.close()
  })

  it("shows a failed task's error code, with the limit set in the form", async () => {
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    const id = await submitFromForm(page, 'Too long [[berth:turns 3]]', { maxTurns: 1 })
    await expect.poll(() => statusOf(page).textContent(), { timeout: 90_000 }).toBe('failed')
    await expect.poll(() => page.locator('.error-line').textContent()).toContain('TURN_LIMIT_EXCEEDED')
    const task = await t.api.tasks.get({ params: { id } })
    expect(task.error?.code).toBe('TURN_LIMIT_EXCEEDED')
    await page.getByRole('link', { name: 'Tasks' }).first().click()
    await expect.poll(() => page.locator(`tr[data-task="${id}"]`).textContent()).toContain('TURN_LIMIT_EXCEEDED')
    await page.close()
  })

  it('cancels a slow task from its page', async () => {
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    const id = await submitFromForm(
      page,
      'Talk slowly [[berth:slow 3000]] [[berth:text one two three four five six seven eight]]',
    )
    await expect.poll(() => statusOf(page).textContent(), { timeout: 60_000 }).toMatch(/running|starting|queued/)
    await page.getByRole('button', { name: 'Cancel task' }).click()
    await expect.poll(() => statusOf(page).textContent(), { timeout: 60_000 }).toBe('cancelled')
    expect((await t.api.tasks.get({ params: { id } })).status).toBe('cancelled')
    expect(await page.getByRole('button', { name: 'Cancelled' }).isDisabled()).toBe(true)
    await page.close()
  })

  it('runs a session: follow-up prompts on the page, files uploaded and downloaded', async () => {
    const page = await browser.page()
    await signIn(page, t.s.url, t.token)
    const first = await submitFromForm(page, 'Remember the word pelican.', { session: true })
    await expect.poll(() => statusOf(page).textContent(), { timeout: 90_000 }).toBe('completed')

    // Upload a file into the workspace, see it in the tree, download it back as itself.
    const content = `uploaded from the console ${Date.now()}\n`
    await page.getByLabel('Directory').fill('inbox')
    await page
      .locator('#upload-files')
      .setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(content) })
    await page.getByRole('button', { name: 'Upload' }).click()
    await expect.poll(() => page.locator('.files [aria-live]').textContent(), { timeout: 30_000 }).toContain('Uploaded')
    await page.getByRole('button', { name: /inbox\// }).click()
    const download = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Download inbox/notes.txt' }).click()
    const file = await download
    expect(file.suggestedFilename()).toBe('notes.txt')
    expect(readFileSync((await file.path())!, 'utf8')).toBe(content)
    // The agent sees it too: the file is really in the workspace.
    const listed = await t.api.files.list((await t.api.tasks.get({ params: { id: first } })).workspace_id!, 'inbox')
    expect(listed.entries.map((e) => e.name)).toEqual(['notes.txt'])

    // A follow-up in the same session resumes the conversation, on the same page.
    await page.getByRole('textbox', { name: 'Follow-up prompt' }).fill('What did I say first? [[berth:recall]]')
    await page.getByRole('button', { name: 'Send' }).click()
    await page.waitForURL((u) => u.hash.startsWith('#/tasks/task_') && !u.hash.endsWith(first))
    await expect
      .poll(() => page.getByRole('region', { name: 'Result' }).last().textContent(), { timeout: 90_000 })
      .toContain('The first prompt was: Remember the word pelican.')
    expect(await page.getByRole('region', { name: 'Prompt' }).count()).toBe(2)
    const second = new URL(page.url()).hash.replace('#/tasks/', '')
    await page.screenshot({ path: join(SHOTS, 'session.png') })

    // The sessions page opens the conversation at its newest task.
    await page.getByRole('link', { name: 'Sessions' }).click()
    const sessionId = (await t.api.tasks.get({ params: { id: first } })).session_id!
    await page.getByRole('button', { name: new RegExp(sessionId) }).click()
    await page.waitForURL((u) => u.hash === `#/tasks/${second}`)
    await page.getByRole('region', { name: 'Result' }).last().waitFor()
    await page.close()
  })

  it('lays out the task page at 1280×800 and at phone width without overflow or overlap', async () => {
    const done = await t.run({
      prompt: `Show it [[berth:tool Bash {"command":"seq 1 200"}]] [[berth:text Counted to two hundred.]]`,
    })
    expect(done.status).toBe('completed')
    for (const [name, viewport] of [
      ['desktop', { width: 1280, height: 800 }],
      ['phone', { width: 390, height: 844 }],
    ] as const) {
      const page = await browser.page(viewport)
      await signIn(page, t.s.url, t.token)
      await page.goto(`${t.s.url}/console#/tasks/${done.task_id}`)
      await page.getByRole('region', { name: 'Result' }).waitFor()
      const layout = await page.evaluate(() => {
        window.scrollTo(0, 0)
        const box = (sel: string) => document.querySelector(sel)!.getBoundingClientRect().toJSON() as DOMRect
        return {
          scrollWidth: document.documentElement.scrollWidth,
          innerWidth: window.innerWidth,
          head: box('.task-head'),
          transcript: box('.transcript-card'),
          nav: box('header.top'),
        }
      })
      expect(layout.scrollWidth, name).toBeLessThanOrEqual(layout.innerWidth)
      expect(layout.head.bottom, name).toBeLessThanOrEqual(layout.transcript.top)
      expect(layout.nav.bottom, name).toBeLessThanOrEqual(layout.head.top)
      // What a person looks for is on screen: the task, its status, numbers and the tool call.
      for (const label of ['Turns', 'Cost', 'Tokens in / out'])
        expect(await page.getByText(label, { exact: true }).isVisible(), label).toBe(true)
      expect(await statusOf(page).textContent()).toBe('completed')
      expect(await page.locator('details.tool .tool-name').first().isVisible()).toBe(true)
      // 200 lines of output are clipped behind "Show all", which shows everything.
      const output = page.locator('pre.tool-output').first()
      expect((await output.textContent())!.split('\n').length).toBeLessThan(200)
      await page.getByRole('button', { name: /Show all/ }).click()
      expect(await output.textContent()).toContain('\n200')
      await page.evaluate(() => window.scrollTo(0, 0))
      await page.screenshot({ path: join(SHOTS, `task-page-${name}.png`), fullPage: false })
      // The list and the form fit the width too (wide tables scroll inside their frame).
      for (const hash of ['#/tasks', '#/new']) {
        await page.goto(`${t.s.url}/console${hash}`)
        await page.locator('main h1').waitFor()
        await page.waitForLoadState('networkidle')
        expect(
          await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth),
          `${name} ${hash}`,
        ).toBe(true)
        await page.screenshot({ path: join(SHOTS, `${hash.slice(2)}-${name}.png`) })
      }
      await page.close()
    }
  })

  it('shows the operator the pool, the limits in use, the users and their keys', async () => {
    // A warm session holds one of its profile's concurrency slots.
    const session = await t.run({ mode: 'session', prompt: 'Stay warm' })
    expect(session.status).toBe('completed')
    const page = await browser.page()
    await signIn(page, t.s.url, t.token, ADMIN_TOKEN)
    await page.getByRole('link', { name: 'Operator' }).click()
    await page.getByRole('heading', { name: 'Warm pool' }).waitFor()
    await expect
      .poll(() => page.locator('section', { has: page.getByRole('heading', { name: 'Warm pool' }) }).textContent())
      .toContain('In use')
    // The engine's state comes from /health: the runtime answers.
    const engine = page.locator('section', { has: page.getByRole('heading', { name: 'Engine and server' }) })
    await expect.poll(() => engine.textContent()).toMatch(/Engine(docker|podman): answering/)
    const limits = page.locator('section', {
      has: page.getByRole('heading', { name: 'Rate and concurrency per caller' }),
    })
    const slots = limits.locator('tr', { hasText: t.profileId })
    await expect.poll(() => slots.locator('td').last().textContent()).toMatch(/^[1-9]\d* \/ 20$/)
    // Its owner is named: the caller whose workspace it is.
    expect(await slots.locator('td').first().textContent()).toMatch(/^usr_/)
    expect(await limits.textContent()).toContain('10000 requests at once per caller')
    await page.getByLabel('Name').fill('Console-made user')
    await page.getByRole('button', { name: 'Create user' }).click()
    const key = await page.getByLabel('Caller key for Console-made user').inputValue()
    expect(key).toMatch(/^berth_sk_/)
    // The new key works against the API.
    expect((await t.s.request('/v1/tasks', { token: key })).status).toBe(200)
    const row = page.locator('tr', { hasText: 'Console-made user' })
    const userId = (await row.locator('.mono').first().textContent())!.trim()
    await row.getByRole('button', { name: 'Issue key' }).click()
    const second = await page.getByLabel('New key for Console-made user').inputValue()
    // Both keys are listed; revoking the first one locks it out at once.
    await expect.poll(() => row.getByRole('button', { name: /^Revoke key/ }).count()).toBe(2)
    const keys = (await t.s.request(`/admin/users/${userId}/keys`, { token: ADMIN_TOKEN }).then((r) => r.json())) as {
      keys: { id: string; created_at: string }[]
    }
    const firstKey = keys.keys.at(-1)!.id
    page.once('dialog', (d) => void d.accept())
    await row.getByRole('button', { name: `Revoke key ${firstKey}` }).click()
    await expect
      .poll(() => page.locator('section', { has: page.getByRole('heading', { name: 'Users and keys' }) }).textContent())
      .toContain(`Revoked ${firstKey}`)
    expect((await t.s.request('/v1/tasks', { token: key })).status).toBe(401)
    expect((await t.s.request('/v1/tasks', { token: second })).status).toBe(200)
    await page.screenshot({ path: join(SHOTS, 'operator.png') })
    await page.close()
  })
})
