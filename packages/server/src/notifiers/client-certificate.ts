import { request } from 'node:https'

/** A TLS client certificate (mutual TLS), PEM; `ca` replaces the trusted roots for the server's certificate. */
export interface ClientCertificate {
  cert: string
  key: string
  ca?: string
}

/**
 * A `fetch` for HTTPS APIs that demand a client certificate (Teller does, outside its
 * sandbox), over `node:https`: Node's global fetch takes no certificate of its own.
 * Enough for JSON APIs: method, headers, a string body, `signal`; redirects are not followed.
 *
 * @example
 * ```ts
 * const doFetch = clientCertificateFetch({ cert: readFileSync('cert.pem', 'utf8'), key: readFileSync('key.pem', 'utf8') })
 * const res = await doFetch('https://api.teller.io/accounts', { headers: { authorization } })
 * ```
 */
export function clientCertificateFetch(tls: ClientCertificate): typeof fetch {
  return (input, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : String(input))
      if (url.protocol !== 'https:')
        return reject(new TypeError(`a client certificate needs an https:// URL, got ${url.protocol}//`))
      const signal = init.signal ?? undefined
      const req = request(
        url,
        {
          method: init.method ?? 'GET',
          headers: Object.fromEntries(new Headers(init.headers)),
          cert: tls.cert,
          key: tls.key,
          ...(tls.ca && { ca: tls.ca }),
          signal,
        },
        (res) => {
          const chunks: Buffer[] = []
          res.on('data', (c: Buffer) => chunks.push(c))
          res.on('error', reject)
          res.on('end', () => {
            const headers = new Headers()
            for (const [k, v] of Object.entries(res.headers))
              if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
            const status = res.statusCode ?? 502
            resolve(
              new Response([101, 204, 205, 304].includes(status) ? null : Buffer.concat(chunks), { status, headers }),
            )
          })
        },
      )
      // An aborted request rejects with the signal's reason (a TimeoutError for AbortSignal.timeout), as fetch does.
      req.on('error', (err) =>
        reject(signal?.aborted ? signal.reason : Object.assign(new TypeError('fetch failed'), { cause: err })),
      )
      req.end(typeof init.body === 'string' ? init.body : undefined)
    })
}
