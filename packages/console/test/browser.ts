/** Chromium through playwright-core, the way the console tests drive it. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page } from 'playwright-core'

/** The flags every launch gets: headless, no sandbox (root), nothing reaching the network. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

export interface Browser {
  context: BrowserContext
  page(viewport?: { width: number; height: number }): Promise<Page>
  close(): Promise<void>
}

/** A fresh Chromium with its own empty profile directory (removed on close). */
export async function launchBrowser(): Promise<Browser> {
  const userDataDir = mkdtempSync(join(tmpdir(), 'berth-console-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.BERTH_CHROMIUM || '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
    headless: true,
    acceptDownloads: true,
    viewport: { width: 1280, height: 800 },
  })
  return {
    context,
    async page(viewport) {
      const page = await context.newPage()
      if (viewport) await page.setViewportSize(viewport)
      return page
    },
    async close() {
      await context.close()
      rmSync(userDataDir, { recursive: true, force: true })
    },
  }
}

/** Sign in on the console's page. */
export async function signIn(page: Page, url: string, key: string, operator?: string): Promise<void> {
  await page.goto(`${url}/console`)
  await page.getByLabel('Caller key').fill(key)
  if (operator) await page.getByLabel(/Operator token/).fill(operator)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { name: 'Tasks' }).waitFor()
}
