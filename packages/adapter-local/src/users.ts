/** The users a local container's commands run as (host uids: the sandbox shares the host's /etc/passwd). */
import { readFileSync } from 'node:fs'
import type { SandboxUser } from './sandbox.js'

/** `/etc/passwd` rows as name, uid, gid. */
function passwd(file: string): { name: string; uid: number; gid: number }[] {
  let text = ''
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return [] // no passwd: numeric users only
  }
  return text
    .split('\n')
    .map((line) => line.split(':'))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[2]!) && /^\d+$/.test(f[3]!))
    .map((f) => ({ name: f[0]!, uid: Number(f[2]), gid: Number(f[3]) }))
}

/**
 * A spec's or exec's `user` (`uid`, `uid:gid`, `name` or `name:group-id`) as host ids; a
 * missing gid is the user's group in `/etc/passwd`, else the uid. Null for a user that
 * does not exist or a malformed one.
 *
 * @example
 * ```ts
 * parseUser('1000:1000') // { uid: 1000, gid: 1000 }
 * parseUser('root') // { uid: 0, gid: 0 }
 * ```
 */
export function parseUser(user: string, passwdFile = '/etc/passwd'): SandboxUser | null {
  const [who = '', group] = user.split(':')
  if (group !== undefined && !/^\d+$/.test(group)) return null
  const rows = passwd(passwdFile)
  const row = /^\d+$/.test(who) ? rows.find((r) => r.uid === Number(who)) : rows.find((r) => r.name === who)
  const uid = /^\d+$/.test(who) ? Number(who) : row?.uid
  if (uid === undefined) return null
  return { uid, gid: group !== undefined ? Number(group) : (row?.gid ?? uid) }
}
