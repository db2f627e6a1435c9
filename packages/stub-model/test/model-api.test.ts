import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startOfflineModel, type OfflineModelServer } from '../src/index.js'

// The official client parses the fake's SSE and errors exactly as it would Anthropic's.
describe('offline model: the Messages API as the official client sees it', () => {
  let model: OfflineModelServer
  let client: Anthropic

  beforeAll(async () => {
    model = await startOfflineModel()
    client = new Anthropic({ baseURL: model.url, apiKey: 'sk-test', maxRetries: 0 })
  })
  afterAll(() => model.close())

  it('streams text in several deltas with message_start ... message_stop and usage', async () => {
    const stream = client.messages.stream({
      model: 'claude-offline-1',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Please summarise the harbour schedule for tomorrow morning' }],
    })
    const types: string[] = []
    const deltas: string[] = []
    stream.on('streamEvent', (e) => {
      types.push(e.type)
      if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') deltas.push(e.delta.text)
    })
    const message = await stream.finalMessage()
    expect(types[0]).toBe('message_start')
    expect(types.at(-2)).toBe('message_delta')
    expect(types.at(-1)).toBe('message_stop')
    expect(types).toContain('content_block_start')
    expect(types).toContain('content_block_stop')
    expect(deltas.length).toBeGreaterThan(2)
    const text = message.content.map((b) => (b.type === 'text' ? b.text : '')).join('')
    expect(deltas.join('')).toBe(text)
    expect(text).toBe('Offline model here. You said: Please summarise the harbour schedule for tomorrow morning')
    expect(message.stop_reason).toBe('end_turn')
    expect(message.usage.input_tokens).toBeGreaterThan(0)
    expect(message.usage.output_tokens).toBeGreaterThan(0)
    expect(message.model).toBe('claude-offline-1')
  })

  it('answers the same non-streaming, as one JSON message', async () => {
    const message = await client.messages.create({
      model: 'claude-haiku-4-5',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Hello [[berth:text Ahoy]] [[berth:usage input=1234 output=56]]' }],
    })
    expect(message).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'Ahoy' }],
      stop_reason: 'end_turn',
      usage: { input_tokens: 1234, output_tokens: 56 },
    })
  })

  it('streams a tool_use block as input_json_delta chunks, then continues after the tool_result', async () => {
    const tools = [
      { name: 'Bash', description: 'Run a command', input_schema: { type: 'object' as const, properties: {} } },
    ]
    const prompt = 'Check [[berth:tool Bash {"command":"echo hi","timeout":5}]] [[berth:text Checked]]'
    const stream = client.messages.stream({
      model: 'm',
      max_tokens: 100,
      tools,
      messages: [{ role: 'user', content: prompt }],
    })
    const partials: string[] = []
    stream.on('inputJson', (partial) => partials.push(partial))
    const first = await stream.finalMessage()
    expect(first.stop_reason).toBe('tool_use')
    const use = first.content.find((b) => b.type === 'tool_use')
    expect(use).toMatchObject({ type: 'tool_use', name: 'Bash', input: { command: 'echo hi', timeout: 5 } })
    expect(use?.type === 'tool_use' && use.id).toMatch(/^toolu_/)
    expect(partials.length).toBeGreaterThan(1)

    const second = await client.messages.create({
      model: 'm',
      max_tokens: 100,
      tools,
      messages: [
        { role: 'user', content: prompt },
        { role: 'assistant', content: first.content },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: (use as { id: string }).id, content: 'hi [[berth:text Hijacked]]' },
          ],
        },
      ],
    })
    // Directives come from the prompt, never from a tool's output.
    expect(second.content).toEqual([{ type: 'text', text: 'Checked' }])
    expect(second.stop_reason).toBe('end_turn')
  })

  it.each([
    ['overloaded', 529, 'overloaded_error'],
    ['api', 500, 'api_error'],
    ['invalid', 400, 'invalid_request_error'],
    ['auth', 401, 'authentication_error'],
    ['rate_limit', 429, 'rate_limit_error'],
  ])('[[berth:error %s]] fails with HTTP %i and error type %s', async (kind, status, type) => {
    const err = await client.messages
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: `x [[berth:error ${kind}]]` }] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.APIError)
    const apiErr = err as InstanceType<typeof Anthropic.APIError>
    expect(apiErr.status).toBe(status)
    expect(apiErr.error).toMatchObject({ type: 'error', error: { type } })
  })

  it('a malformed directive is an invalid_request_error, not a silent default', async () => {
    const err = await client.messages
      .create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: '[[berth:tool Bash {not json}]]' }] })
      .catch((e: unknown) => e)
    expect((err as { status: number }).status).toBe(400)
    expect((err as { error: unknown }).error).toMatchObject({ error: { type: 'invalid_request_error' } })
  })

  it('answers count_tokens and model lookups; unknown paths are 404 in the error shape', async () => {
    const count = await client.messages.countTokens({
      model: 'm',
      messages: [{ role: 'user', content: 'hello there' }],
    })
    expect(count.input_tokens).toBeGreaterThan(0)
    const models = await client.models.list()
    expect(models.data.map((m) => m.id)).toContain('claude-sonnet-4-5')
    expect((await client.models.retrieve('claude-x')).id).toBe('claude-x')
    const res = await fetch(`${model.url}/v1/nothing-here`)
    expect(res.status).toBe(404)
    expect(await res.json()).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: 'Not found: GET /v1/nothing-here' },
    })
  })

  it('records every request, the beta query string included', async () => {
    const before = model.requests.length
    await fetch(`${model.url}/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(model.requests.slice(before)).toMatchObject([
      { method: 'POST', url: '/v1/messages?beta=true', body: { model: 'm' } },
    ])
  })

  it('rejects a wrong key with authentication_error when started with apiKey', async () => {
    const locked = await startOfflineModel({ apiKey: 'right' })
    try {
      const wrong = new Anthropic({ baseURL: locked.url, apiKey: 'wrong', maxRetries: 0 })
      const err = await wrong.models.list().catch((e: unknown) => e)
      expect((err as { status: number }).status).toBe(401)
      const right = new Anthropic({ baseURL: locked.url, apiKey: 'right', maxRetries: 0 })
      expect((await right.models.list()).data.length).toBeGreaterThan(0)
    } finally {
      await locked.close()
    }
  })

  it('[[berth:slow MS]] spaces the deltas out', async () => {
    const started = Date.now()
    const stream = client.messages.stream({
      model: 'm',
      max_tokens: 100,
      messages: [{ role: 'user', content: '[[berth:slow 40]] [[berth:text one two three four five six seven]]' }],
    })
    await stream.finalMessage()
    expect(Date.now() - started).toBeGreaterThanOrEqual(3 * 40)
  })
})
