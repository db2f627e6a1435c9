import { ProviderError, type BankAccount, type BankApi } from '@berth/core'
import { clientCertificateFetch, type ClientCertificate } from './client-certificate.js'

/** The banking-data provider's API (`createBerth({ bankProvider })`). */
export interface BankApiOptions {
  /** API base URL (default `https://api.teller.io`). Point it at a local fake in tests. */
  apiBaseUrl?: string
  /** Per request (default 10 s). */
  timeoutMs?: number
  /** The application's client certificate, which the provider's API demands outside its sandbox (mutual TLS). */
  clientCertificate?: ClientCertificate
  fetch?: typeof fetch
}

/** The provider's error body: `{ error: { code, message } }`. */
function providerError(body: unknown): { code: string | null; message: string | null } {
  const e = body && typeof body === 'object' ? (body as { error?: unknown }).error : undefined
  if (!e || typeof e !== 'object') return { code: null, message: null }
  const { code, message } = e as { code?: unknown; message?: unknown }
  return {
    code: typeof code === 'string' ? code.slice(0, 100) : null,
    message: typeof message === 'string' ? message.slice(0, 300) : null,
  }
}

const str = (x: unknown): string => (typeof x === 'string' ? x : '')

/** One account of `GET /accounts`, or null when it is not shaped like one. */
function toAccount(x: unknown): BankAccount | null {
  if (!x || typeof x !== 'object') return null
  const a = x as Record<string, unknown>
  if (typeof a.id !== 'string' || typeof a.enrollment_id !== 'string') return null
  const inst = (a.institution && typeof a.institution === 'object' ? a.institution : {}) as Record<string, unknown>
  return {
    id: a.id,
    enrollment_id: a.enrollment_id,
    institution: { id: str(inst.id), name: str(inst.name) },
    name: str(a.name),
    type: str(a.type),
    subtype: str(a.subtype),
    currency: str(a.currency),
    last_four: str(a.last_four),
    status: str(a.status),
  }
}

/**
 * Core's `BankApi` over `fetch`, the way Teller's API is called: `GET <base>/accounts`
 * with the enrollment's access token as the HTTP Basic username (empty password). 401 and
 * 403 (a missing, invalid or revoked token) are `unauthorized`; 5xx, timeouts, connection
 * errors and unreadable answers `unavailable`; other 4xx `rejected`, each with the
 * provider's status and error code. Teller also requires the application's client
 * certificate (mutual TLS) in development and production: pass `clientCertificate`.
 *
 * @example
 * ```ts
 * const api = createBankApi({ apiBaseUrl: 'https://api.teller.io' })
 * const accounts = await api.listAccounts(accessToken)
 * ```
 */
export function createBankApi(opts: BankApiOptions = {}): BankApi {
  const base = (opts.apiBaseUrl ?? 'https://api.teller.io').replace(/\/+$/, '')
  const timeoutMs = opts.timeoutMs ?? 10_000
  const doFetch = opts.fetch ?? (opts.clientCertificate ? clientCertificateFetch(opts.clientCertificate) : fetch)
  return {
    async listAccounts(accessToken) {
      const url = `${base}/accounts`
      let res: Response
      try {
        res = await doFetch(url, {
          headers: {
            authorization: `Basic ${Buffer.from(`${accessToken}:`).toString('base64')}`,
            accept: 'application/json',
          },
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        })
      } catch (err) {
        const e = err as Error & { cause?: { code?: string } }
        const why =
          e.name === 'TimeoutError'
            ? `did not answer within ${timeoutMs} ms`
            : `could not be reached (${e.cause?.code ?? e.message})`
        throw new ProviderError('bank', 'unavailable', `${new URL(url).host} ${why}`)
      }
      const text = await res.text().catch(() => '')
      let body: unknown = null
      try {
        body = JSON.parse(text)
      } catch {
        // Not JSON: judged by the status below.
      }
      const { code, message } = providerError(body)
      const detail = `${res.status}${code ? ` ${code}` : ''}${message ? `: ${message}` : ''}`
      if (res.status === 401 || res.status === 403)
        throw new ProviderError('bank', 'unauthorized', `the provider refused the access token (${detail})`, {
          status: res.status,
          code,
        })
      if (res.status >= 500)
        throw new ProviderError('bank', 'unavailable', `the provider answered ${detail}`, { status: res.status, code })
      if (res.status >= 300)
        throw new ProviderError('bank', 'rejected', `the provider answered ${detail}`, { status: res.status, code })
      const accounts = Array.isArray(body) ? body.map(toAccount) : null
      if (!accounts || accounts.some((a) => a === null))
        throw new ProviderError(
          'bank',
          'unavailable',
          'the provider answered something that is not a list of accounts',
          { status: res.status },
        )
      return accounts as BankAccount[]
    },
  }
}
