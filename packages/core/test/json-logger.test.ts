// The default request log: one JSON object per line, the lines of one event-loop turn written
// to stderr at once, and nothing lost when the process exits right after logging.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { jsonLogger } from '../src/ports/logger.js'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('jsonLogger', () => {
  it('writes the same object JSON.stringify would, one line each', () => {
    const lines: string[] = []
    const log = jsonLogger((l) => lines.push(l))
    log.info('request', { method: 'GET', status: 200, caller: undefined, nested: { a: [1, 'two'] } })
    log.warn('quote " and \n newline')
    log.error('empty', {})
    const parsed = lines.map((l) => {
      expect(l.endsWith('\n')).toBe(true)
      expect(l.slice(0, -1)).not.toContain('\n')
      return JSON.parse(l) as Record<string, unknown>
    })
    expect(parsed[0]).toEqual({
      level: 'info',
      time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      msg: 'request',
      method: 'GET',
      status: 200,
      nested: { a: [1, 'two'] },
    })
    expect(Object.keys(parsed[0]!)).toEqual(['level', 'time', 'msg', 'method', 'status', 'nested'])
    expect(parsed[1]).toMatchObject({ level: 'warn', msg: 'quote " and \n newline' })
    expect(Object.keys(parsed[2]!)).toEqual(['level', 'time', 'msg'])
  })

  it('gathers the lines of one turn into one write to stderr', async () => {
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true)
    const log = jsonLogger()
    log.info('one')
    log.info('two', { n: 2 })
    log.warn('three')
    expect(write).not.toHaveBeenCalled()
    await new Promise((r) => setImmediate(r))
    expect(write).toHaveBeenCalledTimes(1)
    const out = String(write.mock.calls[0]![0])
    expect(
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { msg: string }).msg),
    ).toEqual(['one', 'two', 'three'])
  })

  it('writes what is pending when the process exits at once', () => {
    const source = fileURLToPath(new URL('../src/ports/logger.ts', import.meta.url))
    const child = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `import { jsonLogger } from ${JSON.stringify(source)}; jsonLogger().info('last words', { n: 1 }); process.exit(3)`,
      ],
      { encoding: 'utf8', timeout: 60_000 },
    )
    expect(child.status).toBe(3)
    expect(JSON.parse(child.stderr.trim())).toMatchObject({ level: 'info', msg: 'last words', n: 1 })
  })
})
