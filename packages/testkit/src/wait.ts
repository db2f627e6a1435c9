/** Options of {@link waitUntil}. */
export interface WaitUntilOptions {
  /** What is awaited, for the error on timeout. */
  what: string
  /** Milliseconds before giving up; only guards a hang (default 30 s). */
  timeout?: number
  /** Milliseconds between checks (default 20). */
  interval?: number
}

/**
 * Ask `check` again and again until it returns a value other than `undefined`, `null` or
 * `false`, and resolve with that value. For code that does not run under vitest (the soak,
 * the benchmarks) and for suites whose checks answer "not yet" with a value instead of
 * throwing; a test that can throw until the condition holds uses `vi.waitFor`.
 *
 * @example
 * ```ts
 * const job = await waitUntil(() => queue.take(), { what: 'a delayed job becomes ready', timeout: 10_000 })
 * ```
 */
export async function waitUntil<T>(
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: WaitUntilOptions,
): Promise<T> {
  const end = Date.now() + (options.timeout ?? 30_000)
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== null && value !== false) return value
    if (Date.now() > end) throw new Error(`timed out waiting for ${options.what}`)
    await new Promise((resolve) => setTimeout(resolve, options.interval ?? 20))
  }
}
