import { createHash } from 'node:crypto'
import { validationError } from '@berth/contract'
import type { Cipher } from '../ports/cipher.js'

/** What a cursor belongs to: one list (route and path parameters), one caller, one set of filters. */
export interface CursorScope {
  list: string
  caller: string
  /** Path parameters and filters (the query without `page`, `limit` and `cursor`). */
  filter: Record<string, unknown>
}

const VERSION = 1

/** A short digest of the scope: the cursor carries it, so it can be checked and never read back. */
function digest(scope: CursorScope): string {
  const filter = Object.keys(scope.filter)
    .filter((k) => scope.filter[k] !== undefined)
    .sort()
    .map((k) => [k, scope.filter[k]])
  return createHash('sha256')
    .update(JSON.stringify([scope.list, scope.caller, filter]))
    .digest('base64url')
    .slice(0, 22)
}

const invalid = (why: string) =>
  validationError(
    [{ location: 'query', path: 'cursor', message: why }],
    `Invalid query field "cursor": ${why}; pass the next_cursor of this list's previous page`,
  )

/**
 * Opaque list cursors: the order of a page's last record and the list it came from,
 * sealed with the deployment's cipher (authenticated encryption), so a cursor can be neither
 * read nor altered, and one from another list, filter, caller or deployment is a 400.
 *
 * @example
 * ```ts
 * const cursors = new ListCursors(cipher)
 * const scope = { list: 'tasks.list', caller: 'usr_1', filter: { status: 'running' } }
 * cursors.decode(scope, cursors.encode(scope, '2026-…|task_1')) // '2026-…|task_1'
 * ```
 */
export class ListCursors {
  constructor(private readonly cipher: Cipher) {}

  /** The cursor of the page after the record whose list order is `after`. */
  encode(scope: CursorScope, after: string): string {
    return Buffer.from(this.cipher.encrypt(JSON.stringify([VERSION, digest(scope), after]))).toString('base64url')
  }

  /** The list order a cursor starts after; 400 VALIDATION_FAILED (at `cursor`) for anything but this list's own. */
  decode(scope: CursorScope, cursor: string): string {
    let payload: unknown
    try {
      payload = JSON.parse(this.cipher.decrypt(Buffer.from(cursor, 'base64url').toString('utf8')))
    } catch {
      throw invalid('not a cursor Berth handed out (malformed or altered)')
    }
    if (!Array.isArray(payload) || payload[0] !== VERSION || typeof payload[2] !== 'string')
      throw invalid('not a cursor Berth handed out')
    if (payload[1] !== digest(scope)) throw invalid('the cursor belongs to another list, filter or caller')
    return payload[2]
  }
}
