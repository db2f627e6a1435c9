import { createPublicKey, randomBytes, type KeyObject } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { decodeJwt, jwtVerify } from 'jose'
import {
  answer,
  API_ERRORS,
  encodeEvent,
  errorBody,
  messageBody,
  streamEvents,
  type MessagesRequest,
} from '@berth/stub-model'

/** A service account the fake knows: its email and the public half of its key. */
export interface FakeServiceAccount {
  client_email: string
  /** PEM (SPKI) or a key object. */
  public_key: string | KeyObject
}

/** Options of {@link startFakeVertex}. */
export interface FakeVertexOptions {
  accounts: FakeServiceAccount[]
  /** The project and region whose publisher models it serves. */
  projectId: string
  region: string
  /** The model ids it serves (Vertex's, e.g. `claude-sonnet-4-5@20250929`); default any. */
  models?: string[]
  host?: string
  port?: number
}

/** One request the fake received. */
export interface FakeVertexRequest {
  method: string
  path: string
  /** The model id the path names. */
  model: string | null
  body: unknown
  /** The access token it carried, if any. */
  token: string | null
  status: number
  /** What the token endpoint or the model endpoint refused, when it did. */
  refused: string | null
}

/** A running fake of Vertex AI's Claude endpoints and Google's token endpoint. */
export interface FakeVertex {
  /** Base URL of the API, with its version: a credential's `base_url`, e.g. `http://127.0.0.1:43123/v1`. */
  baseUrl: string
  /** The token endpoint, for the service account key's `token_uri`. */
  tokenUri: string
  requests: FakeVertexRequest[]
  /** Every access token issued so far (to check none leaks anywhere). */
  issuedTokens(): string[]
  /** Every token issued so far expires now (the next request with one is a 401). */
  expireTokens(): void
  /** Issue tokens that are already expired (a token service whose clock runs ahead), until set back. */
  issueExpired(on: boolean): void
  close(): Promise<void>
}

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform'
const GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
const PREDICT =
  /^\/v1\/projects\/([^/]+)\/locations\/([^/]+)\/publishers\/anthropic\/models\/([^/:]+):(rawPredict|streamRawPredict)$/
const STATUS: Record<number, string> = {
  400: 'INVALID_ARGUMENT',
  401: 'UNAUTHENTICATED',
  403: 'PERMISSION_DENIED',
  404: 'NOT_FOUND',
}

function sendJson(res: ServerResponse, status: number, body: unknown): number {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
  })
  res.end(text)
  return status
}

/** A Google API error: `{"error":{"code","message","status"}}`. */
const googleError = (res: ServerResponse, code: number, message: string) =>
  sendJson(res, code, { error: { code, message, status: STATUS[code] ?? 'UNKNOWN' } })

/**
 * A local fake of Vertex AI's Anthropic models and of Google's OAuth token endpoint,
 * speaking their real protocols. `POST <tokenUri>` takes the JWT-bearer grant
 * (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=…`) and verifies the
 * assertion's RS256 signature against the account's public key, its issuer, audience (the
 * token URI), lifetime and scope (`invalid_grant` otherwise), then issues an access token.
 * `POST /v1/projects/<p>/locations/<r>/publishers/anthropic/models/<m>:streamRawPredict`
 * (SSE) and `:rawPredict` (JSON; model `count-tokens` counts) need a live token (401
 * `UNAUTHENTICATED` otherwise), the configured project and region, a known model and a
 * body with `anthropic_version: "vertex-2023-10-16"` and no `model`; they answer with the
 * offline model's script.
 *
 * @example
 * ```ts
 * const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
 * const vertex = await startFakeVertex({ accounts: [{ client_email, public_key: publicKey }], projectId: 'p-1', region: 'us-east5' })
 * // the key's JSON: { type: 'service_account', client_email, private_key: <PKCS#8 PEM>, token_uri: vertex.tokenUri }
 * ```
 */
export async function startFakeVertex(o: FakeVertexOptions): Promise<FakeVertex> {
  const requests: FakeVertexRequest[] = []
  const tokens = new Map<string, number>()
  let expired = false
  let url = ''

  const grant = async (raw: string, entry: FakeVertexRequest, res: ServerResponse) => {
    const form = new URLSearchParams(raw)
    const refuse = (error: string, description: string) => {
      entry.refused = `${error}: ${description}`
      return sendJson(res, 400, { error, error_description: description })
    }
    if (form.get('grant_type') !== GRANT_TYPE) return refuse('unsupported_grant_type', 'Invalid grant_type.')
    const assertion = form.get('assertion') ?? ''
    let issuer: unknown
    try {
      issuer = decodeJwt(assertion).iss
    } catch {
      return refuse('invalid_grant', 'Invalid JWT.')
    }
    const account = o.accounts.find((a) => a.client_email === issuer)
    if (!account) return refuse('invalid_grant', 'Invalid grant: account not found')
    const key = typeof account.public_key === 'string' ? createPublicKey(account.public_key) : account.public_key
    let scope: unknown
    try {
      const { payload } = await jwtVerify(assertion, key, {
        issuer: account.client_email,
        audience: `${url}/token`,
        algorithms: ['RS256'],
        requiredClaims: ['iat', 'exp'],
        maxTokenAge: '1h',
      })
      scope = payload.scope
    } catch (err) {
      const expiredJwt = (err as { code?: string }).code === 'ERR_JWT_EXPIRED'
      return refuse(
        'invalid_grant',
        expiredJwt ? 'Invalid JWT: Token must be a short-lived token.' : 'Invalid JWT Signature.',
      )
    }
    if (typeof scope !== 'string' || !scope.split(' ').includes(SCOPE))
      return refuse('invalid_scope', 'Invalid OAuth scope or ID token audience provided.')
    const token = `ya29.fake-${randomBytes(24).toString('hex')}`
    tokens.set(token, expired ? Date.now() - 1000 : Date.now() + 3600_000)
    entry.status = sendJson(res, 200, { access_token: token, expires_in: 3599, token_type: 'Bearer' })
    return entry.status
  }

  const predict = async (req: IncomingMessage, entry: FakeVertexRequest, res: ServerResponse) => {
    const route = PREDICT.exec(entry.path)!
    const token = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? null
    entry.token = token
    const until = token ? tokens.get(token) : undefined
    if (until === undefined || until <= Date.now()) {
      entry.refused = token ? (until === undefined ? 'unknown token' : 'expired token') : 'no token'
      return googleError(
        res,
        401,
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
      )
    }
    const [, project, region, model, action] = route
    if (project !== o.projectId || region !== o.region) {
      entry.refused = `project ${project} in ${region}`
      return googleError(res, 403, `Permission denied on resource project ${project} in ${region}.`)
    }
    const body = entry.body as (MessagesRequest & { anthropic_version?: unknown }) | undefined
    if (typeof body !== 'object' || body === null || body.anthropic_version !== 'vertex-2023-10-16')
      return googleError(res, 400, 'anthropic_version: Input should be vertex-2023-10-16')
    if (model === 'count-tokens' && action === 'rawPredict') {
      if (o.models && !o.models.includes(String(body.model)))
        return googleError(res, 404, `Publisher model ${String(body.model)} not found.`)
      const size = JSON.stringify(body.messages ?? []).length
      return sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(size / 4)) })
    }
    if (o.models && !o.models.includes(model!)) {
      entry.refused = `model ${model}`
      return googleError(
        res,
        404,
        `Publisher Model \`projects/${project}/locations/${region}/publishers/anthropic/models/${model}\` not found.`,
      )
    }
    if ('model' in body) return googleError(res, 400, 'model: Extra inputs are not permitted')
    // Vertex reports the model as the Anthropic API names it.
    const a = answer({ ...body, model: model!.replace(/@(\d{8})$/, '-$1') })
    if (a.kind === 'error')
      return sendJson(res, API_ERRORS[a.error].status, errorBody(API_ERRORS[a.error].type, a.message))
    if (action === 'rawPredict' || !body.stream) return sendJson(res, 200, messageBody(a))
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    for (const e of streamEvents(a)) {
      if (res.destroyed) return 200
      if (a.slowMs && e.event === 'content_block_delta') await new Promise((r) => setTimeout(r, a.slowMs))
      res.write(encodeEvent(e))
    }
    res.end()
    return 200
  }

  const server = createServer((req, res) => {
    const run = async () => {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      const raw = Buffer.concat(chunks).toString('utf8')
      const path = new URL(req.url ?? '/', 'http://fake').pathname
      const route = PREDICT.exec(path)
      let body: unknown
      try {
        body = route && raw ? JSON.parse(raw) : undefined
      } catch {
        body = undefined
      }
      const entry: FakeVertexRequest = {
        method: req.method ?? 'GET',
        path,
        model: route ? decodeURIComponent(route[3]!) : null,
        body,
        token: null,
        status: 0,
        refused: null,
      }
      requests.push(entry)
      if (req.method === 'POST' && path === '/token') entry.status = await grant(raw, entry, res)
      else if (req.method === 'POST' && route) entry.status = await predict(req, entry, res)
      else entry.status = googleError(res, 404, `Not found: ${req.method} ${path}`)
    }
    run().catch((err: unknown) => {
      if (res.headersSent) return res.destroy()
      googleError(res, 500, String(err))
    })
  })
  const host = o.host ?? '127.0.0.1'
  await new Promise<void>((r) => server.listen(o.port ?? 0, host, r))
  url = `http://${host}:${(server.address() as AddressInfo).port}`
  return {
    baseUrl: `${url}/v1`,
    tokenUri: `${url}/token`,
    requests,
    issuedTokens: () => [...tokens.keys()],
    expireTokens: () => {
      for (const t of tokens.keys()) tokens.set(t, Date.now() - 1000)
    },
    issueExpired: (on) => {
      expired = on
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
