import { describe, expect, it } from 'vitest'
import { ApiError, isContainerError } from '@berth/core'
import { connectEngine } from '../src/index.js'
import { toContainerError } from '../src/errors.js'

const ctx = { runtime: 'docker', op: 'inspect', endpoint: 'unix:///x.sock', id: 'abc' }

describe('toContainerError', () => {
  it('maps socket errors to unreachable, 404 to not_found, 409 not running to not_running', () => {
    const down = toContainerError(Object.assign(new Error('connect ENOENT /x.sock'), { code: 'ENOENT' }), ctx)
    expect(down).toBeInstanceOf(ApiError)
    expect(down.code).toBe('CONTAINER_FAILED')
    expect(down.status).toBe(502)
    expect(down.details).toMatchObject({ reason: 'unreachable', runtime: 'docker', endpoint: 'unix:///x.sock' })
    expect(
      isContainerError(
        toContainerError({ statusCode: 404, json: { message: 'No such container: abc' } }, ctx),
        'not_found',
      ),
    ).toBe(true)
    expect(
      isContainerError(
        toContainerError({ statusCode: 409, json: { message: 'Container abc is not running' } }, ctx),
        'not_running',
      ),
    ).toBe(true)
    const other = toContainerError({ statusCode: 500, json: { message: 'boom' } }, ctx)
    expect(other.details).toMatchObject({ reason: 'engine_error', statusCode: 500 })
    expect(other.message).toContain('boom')
  })
})

describe('connectEngine', () => {
  it('describes unix and tcp endpoints', () => {
    expect(connectEngine({ socketPath: '/run/x.sock' }).endpoint).toBe('unix:///run/x.sock')
    expect(connectEngine({ host: '127.0.0.1', port: 2376, protocol: 'https' }).endpoint).toBe('https://127.0.0.1:2376')
  })
})
