/** How preview links are kept: the record per owner, and the token's hash pointing at it. */
import { createHash } from 'node:crypto'
import type { OwnedRecord } from '../records/collection.js'

/** A stored preview link. The token itself is never stored, only its SHA-256. */
export interface PreviewRecord extends OwnedRecord {
  workspace_id: string
  port: number
  expires_at: string
  token_hash: string
}

/** Where a token's hash leads: the preview's owner and id (its record holds the rest). */
export interface TokenPointer {
  owner_id: string
  id: string
}

/** The store key of a token's pointer. */
export const tokenKey = (hash: string) => `preview-tokens:${hash}`

/** A token's SHA-256, hex: tokens carry 256 random bits, so a fast hash is enough. */
export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex')

/** What a preview token looks like (43 base64url characters); anything else is unknown without a lookup. */
export const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/
