/** Plain-object stand-ins for the task tests: a store that counts its calls, a task record, a logger that keeps nothing. */
import type { IndexEntry, IndexQuery, Store } from '../src/ports/store.js'
import type { Logger } from '../src/ports/logger.js'
import type { TaskRecord } from '../src/tasks/task.js'

/** A store in a Map, counting reads and writes per key prefix (the part before the first `:`). */
export function countingStore(): Store & { reads: Map<string, number>; writes: Map<string, number> } {
  const values = new Map<string, string>()
  const scopes = new Map<string, IndexEntry>()
  const reads = new Map<string, number>()
  const writes = new Map<string, number>()
  const bump = (m: Map<string, number>, key: string) => m.set(key.split(':')[0]!, (m.get(key.split(':')[0]!) ?? 0) + 1)
  const parse = <T>(text: string | undefined): T | null => (text === undefined ? null : (JSON.parse(text) as T))
  return {
    reads,
    writes,
    async get<T>(key: string) {
      bump(reads, key)
      return parse<T>(values.get(key))
    },
    async getMany<T>(keys: string[]) {
      return keys.map((k) => parse<T>(values.get(k)))
    },
    async set<T>(key: string, value: T) {
      bump(writes, key)
      values.set(key, JSON.stringify(value))
    },
    async remove(key: string) {
      bump(writes, key)
      values.delete(key)
      scopes.delete(key)
    },
    async keys(prefix: string) {
      return [...values.keys()].filter((k) => k.startsWith(prefix))
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      bump(writes, key)
      values.set(key, JSON.stringify(value))
      scopes.set(key, entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      // Highest order first, within the scope and (when asked) the filter term, below `after`.
      const keys = [...scopes]
        .filter(([, e]) => e.scope === scope && (query.term === undefined || e.terms?.includes(query.term)))
        .filter(([, e]) => query.after === undefined || e.order < query.after)
        .sort(([, a], [, b]) => (a.order < b.order ? 1 : a.order > b.order ? -1 : 0))
        .map(([k]) => k)
      return {
        items: keys.slice(query.offset, query.offset + query.limit).map((k) => parse<T>(values.get(k))!),
        total: keys.length,
      }
    },
  }
}

export const quietLogger: Logger = { info() {}, warn() {}, error() {} }

let seq = 0

/** A stored task as submit writes it, queued. */
export function taskRecord(fields: Partial<TaskRecord> = {}): TaskRecord {
  seq++
  const created = new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString()
  return {
    id: `task_${seq}`,
    owner_id: 'usr_a',
    mode: 'batch',
    profile_id: 'prof_1',
    prompt: 'hello',
    priority: 'normal',
    workspace_id: `ws_${seq}`,
    session_id: `ses_${seq}`,
    allowed_tools: null,
    max_turns: null,
    max_budget_usd: null,
    status: 'queued',
    started_at: null,
    finished_at: null,
    result: null,
    error: null,
    instance_id: null,
    created_at: created,
    updated_at: created,
    ...fields,
  }
}
