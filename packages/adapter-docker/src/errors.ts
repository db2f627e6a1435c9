import { ContainerError, isApiError, type ContainerFailure } from '@berth/core'

/** Where an engine call failed, for the error's message and details. */
export interface FailureContext {
  /** Runtime name, e.g. `docker`. */
  runtime: string
  /** Operation, e.g. `exec`. */
  op: string
  /** The engine's address, e.g. `unix:///var/run/docker.sock`. */
  endpoint: string
  id?: string
  [key: string]: unknown
}

/** Socket-level error codes that mean "the engine is not there". */
const UNREACHABLE = new Set([
  'ENOENT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'EACCES',
  'EPERM',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENOTSOCK',
  'ENOTDIR',
  'ESOCKETTIMEDOUT',
  'ECONNABORTED',
])

interface ModemError {
  code?: string
  statusCode?: number
  json?: { message?: string } | null
  message?: string
}

/**
 * Map a dockerode / docker-modem failure to a {@link ContainerError}: socket errors are
 * `unreachable`, HTTP 404 `not_found`, 409 "not running" `not_running`, anything else
 * `engine_error` with the engine's status and message. ApiErrors pass through.
 *
 * @example
 * ```ts
 * try { await container.inspect() } catch (err) { throw toContainerError(err, { runtime: 'docker', op: 'inspect', endpoint, id }) }
 * ```
 */
export function toContainerError(err: unknown, ctx: FailureContext): ContainerError {
  if (err instanceof ContainerError) return err
  if (isApiError(err)) return new ContainerError('engine_error', err.message, { ...ctx, code: err.code })
  const e = (err ?? {}) as ModemError
  const engineMessage = (e.json && typeof e.json === 'object' && e.json.message) || e.message || String(err)
  const target = ctx.id ? ` ${ctx.id}` : ''
  let reason: ContainerFailure
  let message: string
  if (e.statusCode === undefined && e.code !== undefined && UNREACHABLE.has(e.code)) {
    reason = 'unreachable'
    message = `${ctx.runtime} engine unreachable at ${ctx.endpoint} (${e.code}) during ${ctx.op}`
  } else if (e.statusCode === 404) {
    reason = 'not_found'
    message = `${ctx.runtime} ${ctx.op}${target}: ${engineMessage.trim()}`
  } else if (e.statusCode === 409 && /not running|is paused|stopped|restarting/i.test(engineMessage)) {
    reason = 'not_running'
    message = `${ctx.runtime} ${ctx.op}${target}: ${engineMessage.trim()}`
  } else {
    reason = 'engine_error'
    message = `${ctx.runtime} ${ctx.op}${target} failed: ${engineMessage.trim()}`
  }
  const details: Record<string, unknown> = { ...ctx }
  if (e.statusCode !== undefined) details.statusCode = e.statusCode
  if (e.code !== undefined) details.errno = e.code
  return new ContainerError(reason, message, details)
}

/**
 * The HTTP status of a dockerode failure, if it had one.
 *
 * @example
 * ```ts
 * if (statusOf(err) === 304) return // already stopped
 * ```
 */
export function statusOf(err: unknown): number | undefined {
  return (err as ModemError | undefined)?.statusCode
}
