/**
 * The short chaos soak (bench/soak, `pnpm soak` for the long one): the standalone server
 * as a child process on Docker, batch tasks, session follow-ups, cancels, one SIGKILL with
 * a restart and one container removed from outside; then every task definite, every log
 * dense, the live WebSocket equal to storage, no 5xx or error line, no orphan container or
 * volume beyond warm sessions, and a clean SIGTERM at the end.
 */
import { describe, expect, it } from 'vitest'
import { DEFAULT_CONFIG, runSoak } from '../../../bench/soak/run.js'

describe('short soak (docker)', () => {
  it('loses nothing through a SIGKILL, a container killed from outside and cancels', async () => {
    const { figures, violations } = await runSoak({
      ...DEFAULT_CONFIG,
      engine: 'docker',
      tasks: 10,
      sessions: 2,
      followUps: 1,
      concurrency: 4,
      cancelRate: 0.2,
      serverKills: 1,
      containerKills: 1,
      seed: 17,
      log: () => {},
    })
    expect(violations).toEqual([])
    expect(figures).toMatchObject({ server_sigkills: 1, containers_killed_outside: 1, http_5xx: 0 })
    expect(figures.tasks).toBeGreaterThanOrEqual(14)
    expect(figures.events_checked).toBeGreaterThan(0)
  }, 180_000)
})
