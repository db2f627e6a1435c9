/**
 * `@berth/client/node`: everything of `@berth/client`, with the Node parts: the WebSocket
 * on the `ws` package (Node 20 has no global one), uploads from paths and Node streams,
 * downloads extracted into a directory.
 */
import { buildClient, type BerthClient, type BerthClientOptions, type FileHelpers } from '../client.js'
import type { UploadOptions, UploadResult } from '../files.js'
import { createBerthSocket as createWebSocketClient, type BerthSocket, type BerthSocketOptions } from '../socket.js'
import { extractTar, nodeUpload, type NodeUploadFile } from './files.js'
import { nodeConnect } from './socket.js'

export * from '../index.js'
export { extractTar, nodeUpload, type NodeUploadFile } from './files.js'
export { nodeConnect } from './socket.js'

/** `files` in Node: uploads also from paths and Node streams, and `downloadTo`. */
export interface NodeFileHelpers extends FileHelpers<NodeUploadFile> {
  /**
   * Download files and directories and extract them into `dir` (created when missing);
   * resolves with the entry paths written, relative to `dir`.
   *
   * @example
   * ```ts
   * await berth.files.downloadTo(workspaceId, 'out', './results') // ./results/out/...
   * ```
   */
  downloadTo(
    workspaceId: string,
    paths: string | readonly string[],
    dir: string,
    options?: { signal?: AbortSignal },
  ): Promise<string[]>
}

/** The client in Node. */
export type NodeBerthClient = Omit<BerthClient, 'files'> & { files: NodeFileHelpers }

/**
 * Create a typed Berth client for Node: as `createBerthClient` of `@berth/client`, with
 * the WebSocket on `ws`, uploads from paths (`files.upload(id, './data.csv')`) and
 * `files.downloadTo(id, paths, dir)`.
 *
 * @example
 * ```ts
 * import { createBerthClient } from '@berth/client/node'
 * const berth = createBerthClient({ baseURL: 'http://127.0.0.1:3000', token: process.env.BERTH_TOKEN })
 * const task = await berth.tasks.run({ profile_id, prompt: 'Hello' })
 * await berth.files.downloadTo(task.workspace_id!, '.', './workspace-copy')
 * ```
 */
export function createBerthClient(options: BerthClientOptions): NodeBerthClient {
  return buildClient({ websocket: nodeConnect, ...options }, (client, { upload }) => {
    const files = client.files
    const nodeFiles: NodeFileHelpers = {
      list: files.list,
      download: files.download,
      upload: async (workspaceId, input, o?: UploadOptions): Promise<UploadResult> =>
        upload(
          workspaceId,
          await Promise.all((Array.isArray(input) ? input : [input]).map((f: NodeUploadFile) => nodeUpload(f))),
          o,
        ),
      downloadTo: async (workspaceId, paths, dir, o) => extractTar(await files.download(workspaceId, paths, o), dir),
    }
    Object.defineProperty(client, 'files', { value: nodeFiles, enumerable: false, configurable: true, writable: false })
  }) as unknown as NodeBerthClient
}

/**
 * A reconnecting WebSocket client to Berth on the `ws` package (see `@berth/client`'s
 * `createBerthSocket`).
 *
 * @example
 * ```ts
 * const socket = createBerthSocket({ baseURL: 'http://127.0.0.1:3000', token })
 * ```
 */
export function createBerthSocket(options: BerthSocketOptions): BerthSocket {
  return createWebSocketClient({ connect: nodeConnect, ...options })
}
