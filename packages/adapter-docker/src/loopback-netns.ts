/**
 * Network namespaces with only loopback up, made by Berth for `none` containers under gVisor
 * on Podman: there Podman leaves the namespace to the runtime, and runsc with
 * `--network=host` keeps loopback down, so nothing in the sandbox (the runner's broker
 * forwarder, the agent's own servers) could use 127.0.0.1.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** The label naming a container's own loopback-only namespace (under `/run/netns`). */
export const NETNS_LABEL = 'berth.netns'

const NAME = /^berth-[0-9a-f]{12}$/

/**
 * Make namespace `name` (`berth-` and 12 hex digits) with loopback up; resolves the engine's
 * network mode for it (`ns:/run/netns/<name>`). Needs root and `ip` on the engine's host.
 *
 * @example
 * ```ts
 * await loopbackNetns('berth-3f9a0c12ab34') // 'ns:/run/netns/berth-3f9a0c12ab34'
 * ```
 */
export async function loopbackNetns(name: string): Promise<string> {
  if (!NAME.test(name)) throw new Error(`not a namespace name: ${name}`)
  await run('ip', ['netns', 'add', name])
  try {
    await run('ip', ['-n', name, 'link', 'set', 'lo', 'up'])
  } catch (err) {
    await releaseNetns(name)
    throw err
  }
  return `ns:/run/netns/${name}`
}

/**
 * Delete namespace `name` as a container's {@link NETNS_LABEL} names it; absent ones resolve,
 * and only Berth's own names are touched, whatever a label says.
 *
 * @example
 * ```ts
 * await releaseNetns('berth-3f9a0c12ab34')
 * ```
 */
export async function releaseNetns(name: string): Promise<void> {
  if (!NAME.test(name)) return
  await run('ip', ['netns', 'delete', name]).catch(() => undefined)
}
