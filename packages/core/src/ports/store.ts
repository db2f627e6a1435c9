/**
 * Key/value persistence. Keys are `:`-separated (`profiles:<owner>:<id>`); values are
 * JSON-serialisable records. The server implements it over unstorage; any driver works.
 */
export interface Store {
  get<T>(key: string): Promise<T | null>
  /** Several keys in one call; missing keys are `null`, in input order. */
  getMany<T>(keys: string[]): Promise<(T | null)[]>
  set<T>(key: string, value: T): Promise<void>
  remove(key: string): Promise<void>
  /** All keys that start with `prefix` (a `:`-terminated base), full keys returned. */
  keys(prefix: string): Promise<string[]>
}
