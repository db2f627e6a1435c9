import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createOfflineModel, type OfflineModelOptions, type RecordedAnswer, type RecordedRequest } from './handler.js'

/** A running offline model. */
export interface OfflineModelServer {
  /** Base URL for `ANTHROPIC_BASE_URL`, e.g. `http://127.0.0.1:43123`. */
  url: string
  /** Every request received so far, oldest first. */
  requests: RecordedRequest[]
  /** Every message answered so far (the model calls it served and the usage it reported), oldest first. */
  answers: RecordedAnswer[]
  /** Stop listening and drop open connections. */
  close(): Promise<void>
}

/**
 * Serve the offline model on `host:port` (defaults: 127.0.0.1, a random free port).
 *
 * @example
 * ```ts
 * const model = await startOfflineModel()
 * process.env.ANTHROPIC_BASE_URL = model.url
 * // ... run the agent ...
 * model.answers // [{ model: 'claude-sonnet-4-5', usage: { input_tokens: 12, output_tokens: 5 }, id: 'msg_…' }]
 * await model.close()
 * ```
 */
export async function startOfflineModel(
  opts: OfflineModelOptions & { host?: string; port?: number } = {},
): Promise<OfflineModelServer> {
  const requests: RecordedRequest[] = []
  const answers: RecordedAnswer[] = []
  const server = createServer(
    createOfflineModel({
      ...opts,
      onRequest: (r) => {
        requests.push(r)
        opts.onRequest?.(r)
      },
      onAnswer: (a) => {
        answers.push(a)
        opts.onAnswer?.(a)
      },
    }),
  )
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    requests,
    answers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
