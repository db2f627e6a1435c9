import { chmodSync, chownSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { RunnerInput } from '@berth/contract'

/** Git credentials as the runner input carries them. */
export type GitCredentials = NonNullable<RunnerInput['git_credentials']>

/** What {@link setupGitCredentials} leaves for the run. */
export interface GitCredentialSetup {
  /** Environment that points git at the helper (paths only: no token is in it). */
  env: Record<string, string>
  /** Remove the credential directory (the run is over). */
  cleanup(): void
}

// A POSIX sh credential helper (git-credential(1)): answers `get` for a host it has a line
// for in the 0600 file beside it, ignores `store` and `erase`.
const HELPER = `#!/bin/sh
# Berth's git credential helper: answers "get" from the 0600 credentials file beside it.
[ "$1" = get ] || exit 0
host=
while IFS= read -r line; do
  [ -z "$line" ] && break
  case "$line" in host=*) host="\${line#host=}" ;; esac
done
[ -n "$host" ] || exit 0
tab="$(printf '\\t')"
while IFS="$tab" read -r h u p; do
  if [ "$h" = "$host" ]; then
    printf 'username=%s\\npassword=%s\\n' "$u" "$p"
    exit 0
  fi
done < "$(dirname "$0")/credentials"
exit 0
`

/**
 * Make the task's Git credentials available to git, and only to git: a directory outside
 * the workspace (so workspace listings, downloads and persistent volumes never hold it)
 * with mode 0700, a `credentials` file (0600, one `host<TAB>username<TAB>token` line per
 * host), a credential helper script reading it, and the CA certificates to trust per host.
 * git finds the helper through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`,
 * which hold paths only, so `env` and `~/.gitconfig` show no token. Entries already in
 * `GIT_CONFIG_*` of `baseEnv` (a task's own secrets) are kept ahead of these.
 *
 * @example
 * ```ts
 * const git = setupGitCredentials([{ host: 'github.com', username: 'x-access-token', token }], process.env)
 * // ... run the agent with { ...env, ...git.env } ...
 * git.cleanup()
 * ```
 */
export function setupGitCredentials(
  creds: GitCredentials,
  baseEnv: Record<string, string | undefined>,
  parent: string = tmpdir(),
  /** The agent's user when the runner is root: its git reads these files, so they are its own. */
  owner: { uid: number; gid: number } | null = null,
): GitCredentialSetup {
  const dir = mkdtempSync(join(parent, 'berth-git-'))
  chmodSync(dir, 0o700)
  const file = join(dir, 'credentials')
  const seen = new Set<string>()
  const lines = creds
    .filter((c) => !seen.has(c.host) && seen.add(c.host))
    .map((c) => `${c.host}\t${c.username}\t${c.token}\n`)
  writeFileSync(file, lines.join(''), { mode: 0o600 })
  const helper = join(dir, 'helper')
  writeFileSync(helper, HELPER, { mode: 0o700 })
  const config: [string, string][] = [['credential.helper', helper]]
  creds.forEach((c, i) => {
    if (!c.ca_pem) return
    const ca = join(dir, `ca-${i}.pem`)
    writeFileSync(ca, c.ca_pem, { mode: 0o600 })
    config.push([`http.https://${c.host}/.sslCAInfo`, ca])
  })
  if (owner) for (const f of [dir, ...readdirSync(dir).map((n) => join(dir, n))]) chownSync(f, owner.uid, owner.gid)
  const start = Number.parseInt(baseEnv.GIT_CONFIG_COUNT ?? '0', 10)
  const offset = Number.isInteger(start) && start > 0 ? start : 0
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(offset + config.length), GIT_TERMINAL_PROMPT: '0' }
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${offset + i}`] = key
    env[`GIT_CONFIG_VALUE_${offset + i}`] = value
  })
  return { env, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}
