/** HTTP requests sent as written: a path no URL parser touched, any body on any method, a body left unfinished. */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'

export interface RawAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: string
}

/**
 * Send one request to `origin` with `path` exactly as given (dot segments, `//` and `\`
 * included) and read the whole answer. With `unfinished`, the body is written but the
 * request never ends: only a server that answers before reading it all can answer. A body
 * is sent with its `content-length` unless the headers name a length or
 * `transfer-encoding: chunked` (which makes it chunked).
 *
 * @example
 * ```ts
 * const res = await rawRequest(s.url, { method: 'GET', path: '/v1/tasks/../../admin/users' })
 * ```
 */
export function rawRequest(
  origin: string,
  o: {
    method: string
    path: string
    headers?: Record<string, string>
    body?: string | Uint8Array
    unfinished?: boolean
  },
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false
    const headers = { ...o.headers }
    const framed = Object.keys(headers).some((h) => /^(content-length|transfer-encoding)$/i.test(h))
    // Node frames a body only for some methods by itself: say its length for every one.
    if (o.body !== undefined && !framed) headers['content-length'] = String(Buffer.byteLength(o.body))
    const req = httpRequest(origin, { method: o.method, path: o.path, headers }, (res) => {
      answered = true
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body })
        req.destroy()
      })
      res.on('error', reject)
    })
    // After the answer, the server may close the connection while the body is still being written.
    req.on('error', (err) => {
      if (!answered) reject(err)
    })
    if (o.body !== undefined) req.write(o.body)
    if (!o.unfinished) req.end()
  })
}
