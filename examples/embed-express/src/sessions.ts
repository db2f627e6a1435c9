import { randomBytes } from 'node:crypto'

/** A user of the host application (not a Berth user). */
export interface AppUser {
  id: string
  name: string
  admin: boolean
}

/**
 * Stand-in for the host application's own session handling: sign-in issues an opaque
 * session token, requests carry it as `Authorization: Bearer <session>`. A real app would
 * use its existing sessions (cookies, JWTs, an auth library); only `userFor` matters to Berth.
 *
 * @example
 * ```ts
 * const sessions = createSessions()
 * const token = sessions.signIn({ id: 'u1', name: 'Ada', admin: false })
 * sessions.userFor(`Bearer ${token}`) // { id: 'u1', ... }
 * ```
 */
export function createSessions() {
  const byToken = new Map<string, AppUser>()
  return {
    signIn(user: AppUser): string {
      const token = `sess_${randomBytes(24).toString('base64url')}`
      byToken.set(token, user)
      return token
    },
    signOut(token: string): void {
      byToken.delete(token)
    },
    /** The signed-in user for an `Authorization` header value, or `null`. */
    userFor(authorization: string | null | undefined): AppUser | null {
      const token = authorization?.match(/^Bearer\s+(\S+)$/i)?.[1]
      return (token && byToken.get(token)) || null
    },
  }
}

export type Sessions = ReturnType<typeof createSessions>
