import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { schemaErrors } from '../src/schema-check.js'
import { Steering } from '../src/steer.js'
import { lineReader, pumpControls, readFirstDocument } from '../src/warm.js'

function stdin(text: string, end = true): PassThrough {
  const s = new PassThrough()
  s.write(text)
  if (end) s.end()
  return s
}

describe("the runner's stdin", () => {
  it('reads the input from the first line and keeps the rest for control lines', async () => {
    const lines = lineReader(stdin('{"a":1}\n{"type":"message","text":"hi"}\n'))
    expect(await readFirstDocument(lines)).toBe('{"a":1}')
    const errors: string[] = []
    const steer = new Steering((m) => errors.push(m))
    await pumpControls(lines, steer)
    expect(await steer.takeMessage(new Promise(() => {}))).toBe('hi')
    expect(errors).toEqual([])
  })

  it('still takes one JSON document spread over lines and ended by EOF (an older server)', async () => {
    const doc = JSON.stringify({ a: 1, b: [1, 2] }, null, 2)
    expect(JSON.parse(await readFirstDocument(lineReader(stdin(doc))))).toEqual({ a: 1, b: [1, 2] })
    expect(await readFirstDocument(lineReader(stdin('{"a":')))).toBe('{"a":')
  })
})

describe('Steering', () => {
  it('reports unreadable lines and decisions for no open request, and goes on', async () => {
    const errors: string[] = []
    const steer = new Steering((m) => errors.push(m))
    steer.line('nope')
    steer.line('{"type":"dance"}')
    steer.line('{"type":"decision","request_id":"apr_x","decision":"allow"}')
    steer.line('   ')
    steer.line('{"type":"message","text":"  "}')
    expect(errors).toEqual([
      expect.stringContaining('not JSON'),
      expect.stringContaining('invalid control line'),
      'no open permission request apr_x',
      'an empty message was not handed to the agent',
    ])
    steer.line('{"type":"message","text":"still here"}')
    expect(await steer.takeMessage(new Promise(() => {}))).toBe('still here')
  })

  it('resolves a waiting decision by its id, and gives null when the wait is aborted', async () => {
    const steer = new Steering(() => {})
    const waiting = steer.decision('apr_1', new AbortController().signal)
    steer.line('{"type":"decision","request_id":"apr_1","decision":"deny","message":"no"}')
    expect(await waiting).toEqual({ type: 'decision', request_id: 'apr_1', decision: 'deny', message: 'no' })
    const abort = new AbortController()
    const gone = steer.decision('apr_2', abort.signal)
    abort.abort()
    expect(await gone).toBeNull()
  })

  it('stops handing out messages once the run is over', async () => {
    const steer = new Steering(() => {})
    let over!: () => void
    const until = new Promise<void>((r) => (over = r))
    const next = steer.takeMessage(until)
    over()
    expect(await next).toBeNull()
  })

  it('calls the interrupt handler, also for an interrupt that came before it was installed', () => {
    const steer = new Steering(() => {})
    steer.line('{"type":"interrupt"}')
    let calls = 0
    steer.onInterrupt(() => calls++)
    expect(calls).toBe(1)
  })
})

describe('schemaErrors', () => {
  const schema = {
    type: 'object',
    properties: {
      berth: { type: 'integer', minimum: 1, maximum: 40 },
      name: { type: 'string', minLength: 2, pattern: '^[A-Z]' },
      tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 2 },
      kind: { anyOf: [{ const: 'ship' }, { const: 'boat' }] },
    },
    required: ['berth'],
    additionalProperties: false,
  }

  it('accepts a valid value', () => {
    expect(schemaErrors(schema, { berth: 7, name: 'Ada', tags: ['a'], kind: 'boat' })).toEqual([])
  })

  it('names each violation with its path', () => {
    expect(schemaErrors(schema, { berth: 7.5, name: 'x', tags: ['c', 'a', 'b'], kind: 'car', extra: 1 })).toEqual([
      '$.berth: expected integer, got number',
      '$.name: shorter than 2',
      '$.name: does not match ^[A-Z]',
      '$.tags: more than 2 items',
      '$.tags[0]: not one of the enum values',
      '$.kind: matches none of anyOf',
      '$.extra: no value is allowed here',
    ])
    expect(schemaErrors(schema, {})).toEqual(['$: missing required property "berth"'])
    expect(schemaErrors({ type: ['string', 'null'] }, null)).toEqual([])
    expect(schemaErrors({ not: { type: 'string' } }, 'x')).toEqual(['$: matches the schema under "not"'])
  })
})
