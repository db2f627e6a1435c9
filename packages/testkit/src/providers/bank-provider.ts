import { randomBytes } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Options of {@link startFakeBankProvider}. */
export interface FakeBankProviderOptions {
  host?: string
  port?: number
}

/** What the connect widget's `onSuccess` hands the app (Teller's shape). */
export interface FakeEnrollment {
  accessToken: string
  enrollment: { id: string; institution: { name: string } }
  user: { id: string }
}

/** One request the fake received (no token values kept). */
export interface FakeBankRequest {
  method: string
  path: string
  /** Whether it carried Basic credentials at all. */
  authenticated: boolean
  /** The HTTP status the fake answered (null while hanging). */
  status: number | null
}

/** How the fake misbehaves: answer every API request with this 5xx, or never answer. */
export type FakeBankFailure = { status: number } | 'hang' | null

/** A running fake banking-data provider. */
export interface FakeBankProvider {
  /** API base URL, e.g. `http://127.0.0.1:43123` (for `createBerth({ bankProvider: { apiBaseUrl } })`). */
  url: string
  /**
   * A user completes the connect widget at `institution` with `accounts` accounts (default
   * 2): the success payload the widget would hand over, with a fresh access token.
   */
  enroll(opts?: { institution?: string; accounts?: number }): FakeEnrollment
  /** The user disconnects the enrollment at the provider: its token stops working (403). */
  revoke(accessToken: string): void
  /** Make every API request fail with a 5xx, or hang (`'hang'`), until set back to `null`. */
  fail(mode: FakeBankFailure): void
  /** Every request so far, oldest first. */
  requests: FakeBankRequest[]
  /** Every access token issued so far (to check none leaks anywhere). */
  issuedTokens(): string[]
  close(): Promise<void>
}

interface Enrollment {
  id: string
  userId: string
  institution: { id: string; name: string }
  accounts: Record<string, unknown>[]
  revoked: boolean
}

const hex = (n: number) => randomBytes(n).toString('hex')

/** An error in the provider's shape: `{ error: { code, message } }`. */
function sendError(res: ServerResponse, status: number, code: string, message: string): number {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
  res.end(JSON.stringify({ error: { code, message } }))
  return status
}

/**
 * A local fake of a Teller-shaped banking-data API. `enroll()` plays the connect widget
 * and returns its success payload; `GET /accounts` (HTTP Basic: the access token as the
 * username, empty password) lists the enrollment's accounts in the provider's shape,
 * `GET /accounts/:id` one of them. A missing token is a 401, an unknown or revoked one a
 * 403, an unknown path a 404, all as `{ error: { code, message } }`. `fail()` makes it
 * answer 5xx or hang, to test timeouts and outages. (The real API also demands a client
 * certificate, mutual TLS; the fake does not.)
 *
 * @example
 * ```ts
 * const bank = await startFakeBankProvider()
 * const berth = createBerth({ bankProvider: { apiBaseUrl: bank.url } })
 * const payload = bank.enroll({ institution: 'Security Credit Union' }) // POST it to /v1/integrations/bankprovider/callback
 * ```
 */
export async function startFakeBankProvider(opts: FakeBankProviderOptions = {}): Promise<FakeBankProvider> {
  const byToken = new Map<string, Enrollment>()
  const requests: FakeBankRequest[] = []
  let failure: FakeBankFailure = null
  let url = ''

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://fake').pathname
    const header = req.headers.authorization
    const entry: FakeBankRequest = {
      method: req.method ?? 'GET',
      path,
      authenticated: Boolean(header?.startsWith('Basic ')),
      status: null,
    }
    requests.push(entry)
    req.resume()
    if (failure === 'hang') return
    if (failure) {
      entry.status = sendError(
        res,
        failure.status,
        'internal_server_error',
        'The institution is unavailable, try again later.',
      )
      return
    }
    if (!header?.startsWith('Basic ')) {
      entry.status = sendError(
        res,
        401,
        'missing_credentials',
        'Access token required: send it as the Basic auth username.',
      )
      return
    }
    const token = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':')[0] ?? ''
    const enrollment = byToken.get(token)
    if (!enrollment || enrollment.revoked) {
      entry.status = sendError(res, 403, 'invalid_token', 'The access token is invalid or has been revoked.')
      return
    }
    const one = path.match(/^\/accounts\/([^/]+)$/)
    const body =
      path === '/accounts' ? enrollment.accounts : one ? enrollment.accounts.find((a) => a.id === one[1]) : undefined
    if (req.method !== 'GET' || body === undefined) {
      entry.status = sendError(res, 404, 'not_found', 'The requested resource was not found.')
      return
    }
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
    res.end(JSON.stringify(body))
    entry.status = 200
  })
  await new Promise<void>((r) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', r))
  url = `http://${opts.host ?? '127.0.0.1'}:${(server.address() as AddressInfo).port}`

  return {
    url,
    requests,
    enroll({ institution = 'Security Credit Union', accounts = 2 } = {}) {
      const id = `enr_${hex(10)}`
      const inst = { id: institution.toLowerCase().replace(/\W+/g, '_'), name: institution }
      const list = Array.from({ length: accounts }, (_, i) => {
        const accId = `acc_${hex(10)}`
        return {
          id: accId,
          enrollment_id: id,
          institution: inst,
          name: i === 0 ? 'Checking' : `Savings ${i}`,
          type: 'depository',
          subtype: i === 0 ? 'checking' : 'savings',
          currency: 'USD',
          last_four: String(1000 + i * 1111).slice(-4),
          status: 'open',
          links: {
            self: `${url}/accounts/${accId}`,
            balances: `${url}/accounts/${accId}/balances`,
            transactions: `${url}/accounts/${accId}/transactions`,
          },
        }
      })
      const accessToken = `token_${hex(16)}`
      const userId = `usr_${hex(8)}`
      byToken.set(accessToken, { id, userId, institution: inst, accounts: list, revoked: false })
      return { accessToken, enrollment: { id, institution: { name: institution } }, user: { id: userId } }
    },
    revoke(accessToken) {
      const e = byToken.get(accessToken)
      if (e) e.revoked = true
    },
    fail(mode) {
      failure = mode
    },
    issuedTokens: () => [...byToken.keys()],
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
