import { credentials } from './session.js'

/** An answer in Berth's error shape `{ error, code, details? }`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message)
  }
}

/**
 * Where the API lives: the console is served at `<base>/console`, the API at `<base>/v1/…`.
 *
 * @example
 * ```ts
 * apiBase() // 'http://127.0.0.1:3000' on http://127.0.0.1:3000/console
 * ```
 */
export function apiBase(): string {
  const path = location.pathname
  const at = path.lastIndexOf('/console')
  return location.origin + (at >= 0 ? path.slice(0, at) : '')
}

export interface CallOptions {
  method?: string
  json?: unknown
  body?: BodyInit
  /** Send the operator token instead of the caller key. */
  admin?: boolean
  /** A token to use instead of the stored ones (sign-in checks). */
  token?: string
  signal?: AbortSignal
}

/**
 * The raw response of an authenticated request (for downloads); throws {@link ApiError}.
 *
 * @example
 * ```ts
 * const tar = await (await request('/v1/workspaces/ws_1/download?path=a.txt')).arrayBuffer()
 * ```
 */
export async function request(path: string, o: CallOptions = {}): Promise<Response> {
  const c = credentials()
  const token = o.token ?? (o.admin ? (c?.operator ?? c?.key) : c?.key)
  const headers = new Headers()
  if (token) headers.set('authorization', `Bearer ${token}`)
  if (o.json !== undefined) headers.set('content-type', 'application/json')
  const res = await fetch(apiBase() + path, {
    method: o.method ?? 'GET',
    headers,
    body: o.json !== undefined ? JSON.stringify(o.json) : (o.body ?? null),
    signal: o.signal ?? null,
    // The key travels in the header only; no cookies are involved.
    credentials: 'omit',
    cache: 'no-store',
  })
  if (!res.ok) {
    let body: { error?: string; code?: string; details?: unknown } = {}
    try {
      body = await res.json()
    } catch {
      /* not JSON */
    }
    throw new ApiError(res.status, body.code ?? `HTTP_${res.status}`, body.error ?? res.statusText, body.details)
  }
  return res
}

/**
 * A JSON request; resolves to the parsed body (`undefined` for a 204).
 *
 * @example
 * ```ts
 * const { tasks } = await api<{ tasks: Task[] }>('/v1/tasks?limit=20')
 * await api('/v1/tasks/task_1/cancel', { method: 'POST' })
 * ```
 */
export async function api<T = unknown>(path: string, o: CallOptions = {}): Promise<T> {
  const res = await request(path, o)
  if (res.status === 204) return undefined as T
  return (await res.json()) as T
}

/**
 * A message for a failure, with its code.
 *
 * @example
 * ```ts
 * describeError(err) // 'Rate limit exceeded (RATE_LIMITED, retry in 3 s)'
 * ```
 */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    const retry = (err.details as { retry_after?: number } | undefined)?.retry_after
    return `${err.message} (${err.code}${retry ? `, retry in ${retry} s` : ''})`
  }
  return err instanceof Error ? err.message : String(err)
}
