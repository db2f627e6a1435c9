import type { Readable } from 'node:stream'
import { toWebStream, type ByteSource } from '@berth/core'
import type { EngineContext } from './context.js'
import { toRequestBody } from './internal/streams.js'

/**
 * Extract a tar into `path` in the container (`PUT /containers/{id}/archive`). The path
 * must be an existing directory; a missing one is CONTAINER_FAILED `not_found`. Docker
 * checks that itself; Podman creates missing directories, so its adapter sets
 * `verifyPath` to check first (`HEAD /archive`) and keep the contract.
 *
 * @example
 * ```ts
 * await putArchive(ctx, id, '/workspace', tarBytes)
 * ```
 */
export async function putArchive(
  ctx: EngineContext,
  id: string,
  path: string,
  tar: ByteSource,
  options: { verifyPath?: boolean } = {},
): Promise<void> {
  const container = ctx.docker.getContainer(id)
  try {
    if (options.verifyPath) {
      // HEAD /archive answers 404 for a missing path. dockerode hands back the response
      // stream; it must be resumed or the request never completes.
      const head = (await container.infoArchive({ path })) as unknown as Readable
      head.resume()
    }
    await container.putArchive(toRequestBody(tar), { path })
  } catch (err) {
    throw ctx.error(err, 'putArchive', { id, path })
  }
}

/**
 * A tar of `path` in the container (`GET /containers/{id}/archive`), as a web stream. The
 * archive's top entry is the path's base name; `transform` may rewrite the tar stream
 * (Podman's adapter uses it to name directories like Docker does).
 *
 * @example
 * ```ts
 * const tar = await getArchive(ctx, id, '/workspace')
 * for await (const chunk of tar) process.stdout.write(chunk)
 * ```
 */
export async function getArchive(
  ctx: EngineContext,
  id: string,
  path: string,
  transform?: (tar: Readable) => AsyncIterable<Uint8Array>,
): Promise<ReadableStream<Uint8Array>> {
  let res: Readable
  try {
    res = (await ctx.docker.getContainer(id).getArchive({ path })) as unknown as Readable
  } catch (err) {
    throw ctx.error(err, 'getArchive', { id, path })
  }
  const body = transform ? transform(res) : res
  return toWebStream(body as AsyncIterable<Uint8Array>, () => res.destroy())
}
