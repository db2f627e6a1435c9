/** `defineRuntime`: how an adapter declares itself, with every operation's errors made `ContainerError`s. */
import { isApiError } from '@berth/contract'
import type { ContainerRuntime, ExecProcess } from '../ports/container-runtime.js'
import { ContainerError } from './errors.js'

/**
 * Define a runtime adapter, like unstorage's `defineDriver`: returns the factory, wrapped
 * so that any error an operation throws that is not already an {@link ApiError} becomes a
 * {@link ContainerError} (`engine_error`) naming the runtime and the operation.
 *
 * @example
 * ```ts
 * export const fakeRuntime = defineRuntime((opts: { name?: string } = {}) => ({
 *   name: opts.name ?? 'fake', capabilities: { isolation: false, limits: false },
 *   ping: async () => {}, create: async () => ({ id: 'c1', name: 'c1' }), ...rest,
 * }))
 * const rt = fakeRuntime()
 * ```
 */
export function defineRuntime<A extends unknown[], R extends ContainerRuntime>(
  factory: (...args: A) => R,
): (...args: A) => R {
  // The guarded runtime inherits from the factory's (`Object.create`), so what `R` adds stays reachable.
  return (...args) => guardRuntime(factory(...args)) as R
}

const GUARDED = [
  'ping',
  'create',
  'start',
  'stop',
  'remove',
  'createVolume',
  'listVolumes',
  'removeVolume',
  'putArchive',
  'getArchive',
  'list',
  'inspect',
  'stats',
  'listFiles',
  'readFile',
  'archiveFiles',
  'writeFiles',
] as const

function guardRuntime(rt: ContainerRuntime): ContainerRuntime {
  const wrap = (op: string, err: unknown): never => {
    if (isApiError(err)) throw err
    const message = err instanceof Error ? err.message : String(err)
    throw new ContainerError('engine_error', `${rt.name} ${op} failed: ${message}`, { runtime: rt.name, op })
  }
  const guarded: ContainerRuntime = Object.create(rt)
  for (const op of [...GUARDED, ...(rt.ensureImage ? (['ensureImage'] as const) : [])]) {
    const fn = rt[op] as (...a: unknown[]) => Promise<unknown>
    ;(guarded as unknown as Record<string, unknown>)[op] = (...a: unknown[]) => {
      try {
        return fn.apply(rt, a).catch((err) => wrap(op, err))
      } catch (err) {
        return Promise.reject(err).catch((e) => wrap(op, e))
      }
    }
  }
  guarded.exec = async (id, options) => {
    let proc: ExecProcess
    try {
      proc = await rt.exec(id, options)
    } catch (err) {
      return wrap('exec', err)
    }
    const exit = proc.exit.catch((err) => wrap('exec', err))
    exit.catch(() => {}) // surfaced to whoever awaits `exit`; never an unhandled rejection
    return { ...proc, exit }
  }
  return guarded
}
