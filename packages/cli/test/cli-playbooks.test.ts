/** `berth playbooks` (the package's bin, built output, a real process) against a real server: schedules from the terminal. */
import { type BerthRun, runBerth } from './cli.helpers.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, type TestServer } from '../../server/test/helpers.js'

/** Run `berth …` to its end. */
const berth = (args: string[]): Promise<BerthRun> => runBerth(s.url, token, args)

let s: TestServer
let token: string

beforeAll(async () => {
  s = await startServer()
  token = (await s.user('A')).token
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  await api.profiles.create({ body: { name: 'Docs', slug: 'docs', api_key_id: key.id } })
})
afterAll(() => s.close())

describe('berth playbooks', () => {
  it('creates a scheduled playbook with --cron/--timezone/--missed, shows its next runs, pauses it and refuses a bad cron', async () => {
    const made = await berth([
      'playbooks',
      'create',
      '--json',
      '-p',
      'docs',
      '--name',
      'Morning',
      '--prompt',
      'Triage.',
      '--cron',
      '0 7 * * 1-5',
      '--timezone',
      'Europe/Berlin',
      '--missed',
      'run_once',
    ])
    expect(made.code, made.stderr).toBe(0)
    const pb = JSON.parse(made.stdout) as { id: string; trigger_type: string; schedule: unknown; next_runs: string[] }
    expect(pb).toMatchObject({
      trigger_type: 'schedule',
      schedule: { cron: '0 7 * * 1-5', timezone: 'Europe/Berlin', missed: 'run_once' },
    })
    expect(pb.next_runs).toHaveLength(5)

    const shown = await berth(['playbooks', 'show', pb.id])
    expect(shown.code).toBe(0)
    expect(shown.stdout).toContain('0 7 * * 1-5 in Europe/Berlin, missed: run_once')
    expect(shown.stdout).toContain(pb.next_runs[0])

    const listed = await berth(['playbooks', 'ls', '-p', 'docs'])
    expect(listed.stdout).toMatch(new RegExp(`${pb.id}\\s+schedule\\s+0 7 \\* \\* 1-5 \\(Europe/Berlin\\)`))

    const paused = await berth(['playbooks', 'update', pb.id, '--disable', '--json'])
    expect(JSON.parse(paused.stdout)).toMatchObject({ enabled: false, next_runs: [] })

    const bad = await berth(['playbooks', 'update', pb.id, '--cron', '0 25 * * *'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain('schedule.cron')
  })
})
