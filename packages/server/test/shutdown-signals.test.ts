/** The standalone server's signal handling: one shutdown per request, a real second signal exits at once. */
import { createServer, type Server } from 'node:http'
import { afterEach, expect, it, vi } from 'vitest'
import { onShutdown } from '../src/embedded/shutdown.js'

const undo: (() => void)[] = []
afterEach(() => {
  for (const off of undo.splice(0)) off()
})

async function listening(): Promise<Server> {
  const server = createServer((_req, res) => res.end('ok'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server
}

it('a repeat of the signal right after the first (pnpm passing it on) is the same shutdown', async () => {
  const lines: string[] = []
  const exit = vi.fn()
  let finishCleanup!: () => void
  const cleanup = vi.fn(() => new Promise<void>((resolve) => (finishCleanup = resolve)))
  undo.push(onShutdown(await listening(), cleanup, { exit, log: (l) => lines.push(l) }))
  process.emit('SIGTERM', 'SIGTERM')
  process.emit('SIGTERM', 'SIGTERM')
  await vi.waitFor(() => expect(cleanup).toHaveBeenCalled())
  finishCleanup()
  await vi.waitFor(() => expect(exit).toHaveBeenCalled())
  expect(exit.mock.calls).toEqual([[0]])
  expect(lines).toEqual(['SIGTERM: shutting down (grace 5000 ms)', 'stopped'])
})

it('a second signal after the window exits at once with 1', async () => {
  const lines: string[] = []
  const exit = vi.fn()
  const cleanup = vi.fn(() => new Promise<void>(() => {})) // never finishes
  undo.push(onShutdown(await listening(), cleanup, { exit, log: (l) => lines.push(l), sameSignalMs: 0 }))
  process.emit('SIGINT', 'SIGINT')
  await vi.waitFor(() => expect(cleanup).toHaveBeenCalled())
  process.emit('SIGINT', 'SIGINT')
  expect(exit.mock.calls).toEqual([[1]])
  expect(lines).toContain('SIGINT again: exiting now')
})
