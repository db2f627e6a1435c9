import { ApiError, notFound } from '@berth/contract'
import { readJsonBytes } from '../internal/input.js'
import type { RateLimiter } from '../limits/rate-limit.js'
import type { PlaybookRunsService } from './playbook-runs.js'
import type { PlaybooksService } from './playbooks.js'

export interface WebhookTriggerOptions {
  playbooks: PlaybooksService
  runs: PlaybookRunsService
  /** Token bucket keyed by playbook id. */
  limiter: RateLimiter
  /** Largest body handed to the run, in bytes (default 64 KiB). */
  bodyLimit?: number
}

/**
 * The public webhook trigger `POST /api/playbooks/:id/webhook/:secret`. Order matters:
 * the secret is checked first, so an unknown id, a wrong secret and a playbook that is not
 * a webhook one are the same 404 at the same cost; only a caller holding the secret can
 * spend the playbook's rate budget or learn anything more (429, 413, 400).
 *
 * @example
 * ```ts
 * const trigger = new WebhookTrigger({ playbooks, runs, limiter: tokenBucket({ rpm: 60, burst: 10, clock }) })
 * await trigger.fire('pb_1', 'whsec_…', request) // { status: 'started', playbook_id, run_id }
 * ```
 */
export class WebhookTrigger {
  private readonly bodyLimit: number

  constructor(private readonly o: WebhookTriggerOptions) {
    this.bodyLimit = o.bodyLimit ?? 64 * 1024
  }

  async fire(
    id: string,
    secret: string,
    request: Request,
  ): Promise<{ status: 'started'; playbook_id: string; run_id: string }> {
    const playbook = await this.o.playbooks.verifyWebhook(id, secret)
    if (!playbook) throw notFound('playbook', id)
    const decision = await this.o.limiter.take(id)
    if (!decision.allowed) {
      throw new ApiError(
        'RATE_LIMITED',
        `This playbook's webhook was triggered too often: ${decision.limit} at once, refilled over a minute`,
        { limit: decision.limit, retry_after: decision.retryAfterSeconds },
        { 'retry-after': String(decision.retryAfterSeconds) },
      )
    }
    const body = await readJsonText(request, this.bodyLimit)
    return this.o.runs.start(playbook, 'webhook', body)
  }
}

/**
 * The request's body as text when it is JSON (any JSON value), `undefined` when empty:
 * 413 beyond `limit` bytes, 415 when not sent as JSON, 400 when it is not JSON.
 */
async function readJsonText(request: Request, limit: number): Promise<string | undefined> {
  const bytes = await readJsonBytes(request, limit)
  if (bytes.length === 0) return undefined
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes)
  try {
    JSON.parse(text)
  } catch (err) {
    throw new ApiError('VALIDATION_FAILED', 'Malformed JSON body', {
      issues: [{ location: 'body', path: '', message: (err as Error).message.slice(0, 200) }],
    })
  }
  return text
}
