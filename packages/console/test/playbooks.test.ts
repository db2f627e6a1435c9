/**
 * Playbooks in the console, in a real browser (Debian's chromium via playwright-core)
 * against a real Berth: create a scheduled playbook from the form, see its next runs, pause
 * and resume it, and read the 400 of a bad cron expression on the form.
 */
import { systemClock } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, type TestServer } from '../../server/test/helpers.js'
import { launchBrowser, signIn, type Browser } from './browser.js'

let s: TestServer
let token: string
let browser: Browser

beforeAll(async () => {
  s = await startServer({ console: true, clock: systemClock })
  token = (await s.user('Ada')).token
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  await api.profiles.create({ body: { name: 'Docs', slug: 'docs', api_key_id: key.id } })
  browser = await launchBrowser()
})

afterAll(async () => {
  await browser?.close()
  await s?.close()
})

describe('console playbooks', () => {
  it('creates a scheduled playbook, shows its next runs, pauses and resumes it, and shows a bad cron refused', async () => {
    const page = await browser.page()
    await signIn(page, s.url, token)
    await page.getByRole('link', { name: 'Playbooks' }).click()
    await page.getByRole('heading', { name: 'Playbooks' }).waitFor()
    await page.getByText('New playbook').click()
    const form = page.getByRole('form', { name: 'New playbook' })
    await form.getByLabel('Name').fill('Morning triage')
    await form.getByLabel('Prompt').fill('Triage the new issues.')
    await form.getByLabel('Trigger').selectOption('schedule')
    await form.getByLabel('Cron expression').fill('0 7 * * 1-5')
    await form.getByLabel('Time zone').fill('Europe/Berlin')
    await form.getByLabel(/missed/).selectOption('run_once')
    await form.getByRole('button', { name: 'Create playbook' }).click()

    const card = page.getByRole('region', { name: 'Morning triage' })
    const next = card.getByRole('list', { name: 'Next runs of Morning triage' })
    await expect.poll(() => next.getByRole('listitem').count()).toBe(5)
    expect(await card.textContent()).toContain('0 7 * * 1-5 in Europe/Berlin (missed: run_once)')
    const [pb] = (await clientFor(s, token).profiles.list({})).profiles
    const stored = (await clientFor(s, token).profiles.playbooks({ params: { id: pb!.id }, query: {} })).playbooks
    expect(stored).toMatchObject([{ name: 'Morning triage', trigger_type: 'schedule', enabled: true }])
    // The times shown are the server's next runs.
    const first = await next.getByRole('listitem').first().locator('time').getAttribute('datetime')
    expect(first).toBe(stored[0]!.next_runs[0])

    await card.getByRole('button', { name: 'Pause' }).click()
    await expect.poll(() => card.textContent()).toContain('paused')
    expect(await next.count()).toBe(0)
    expect((await clientFor(s, token).playbooks.get({ params: { id: stored[0]!.id } })).enabled).toBe(false)
    await card.getByRole('button', { name: 'Resume' }).click()
    await expect.poll(() => next.getByRole('listitem').count()).toBe(5)

    await card.getByText('Edit').click()
    const edit = card.getByRole('form', { name: 'Playbook Morning triage' })
    await edit.getByLabel('Cron expression').fill('0 25 * * *')
    await edit.getByRole('button', { name: 'Save' }).click()
    await expect.poll(() => edit.getByRole('alert').textContent()).toContain('schedule.cron')
    await page.close()
  })
})
