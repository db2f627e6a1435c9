/**
 * A JSON caller for a Berth under benchmark: `call(method, path, token, body?)` parses the
 * answer and throws on any non-2xx (set-up steps must not fail silently).
 *
 * @example
 * ```ts
 * const call = apiCaller('http://127.0.0.1:3000')
 * const { id } = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'k', provider: 'stub' })
 * ```
 */
export function apiCaller(base: string) {
  return async <T>(method: string, path: string, token: string, body?: unknown): Promise<T> => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${text}`)
    return JSON.parse(text) as T
  }
}
