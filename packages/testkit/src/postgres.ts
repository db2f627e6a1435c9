import { execFileSync, spawn } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findRepoRoot } from './engines.js'

/** A private PostgreSQL cluster started for a test, on 127.0.0.1 and a unix socket in a temporary directory. */
export interface LocalPostgres {
  /** `postgres://berth@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  url: string
  /** The directory holding the unix socket (`psql -h <dir> -p <port> -U berth postgres`). */
  socketDir: string
  port: number
  /** The directory of Debian's server binaries (`pg_dump`, `psql`, ...). */
  binDir: string
  /** Stop the server and remove its directory. */
  stop(): Promise<void>
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** The uid and gid of Debian's `postgres` user: the server refuses to run as root. */
function postgresUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null
  const [uid, gid] = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' })))
  return { uid: uid!, gid: gid! }
}

/** Options of {@link startPostgres}. */
export interface StartPostgresOptions {
  /** Serve TLS too (`ssl=on`) with this PEM key and certificate (e.g. testkit's `selfSignedCert`). */
  tls?: { key: string; cert: string }
}

/**
 * Start a throwaway PostgreSQL cluster from Debian's `postgresql` (installed by
 * `scripts/postgres/ensure.sh` when missing): `initdb` into a fresh temporary directory,
 * then `postgres` listening on 127.0.0.1 at a free port and on a unix socket in that
 * directory, with `fsync=off` (a test's data need not survive a power cut). Run as root,
 * both run as the `postgres` user (through `setpriv`), which owns the directory. The
 * superuser is `berth`, trusted without a password on loopback only. With `tls`, clients
 * may also connect over TLS (`?sslmode=verify-full`). `stop()` ends it.
 *
 * @example
 * ```ts
 * const pg = await startPostgres()
 * const store = await postgresStore(pg.url)
 * await store.close()
 * await pg.stop()
 * ```
 */
export async function startPostgres(opts: StartPostgresOptions = {}): Promise<LocalPostgres> {
  const binDir = execFileSync('bash', [join(findRepoRoot(), 'scripts/postgres/ensure.sh')], {
    encoding: 'utf8',
  }).trim()
  const dir = mkdtempSync(join(tmpdir(), 'berth-postgres-'))
  const data = join(dir, 'data')
  const user = postgresUser()
  if (user) chownSync(dir, user.uid, user.gid)
  const as = (cmd: string, args: string[]): [string, string[]] =>
    user
      ? ['setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--', cmd, ...args]]
      : [cmd, args]
  try {
    execFileSync(
      ...as(join(binDir, 'initdb'), [
        '-D',
        data,
        '-U',
        'berth',
        '--auth=trust',
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ]),
      { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir },
    )
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    throw new Error(`initdb failed: ${String((err as { stderr?: Buffer }).stderr ?? err)}`)
  }
  const tls: string[] = []
  if (opts.tls) {
    // The server refuses a key file others can read; it must belong to the user it runs as.
    for (const [name, pem] of [
      ['server.key', opts.tls.key],
      ['server.crt', opts.tls.cert],
    ] as const) {
      writeFileSync(join(dir, name), pem, { mode: 0o600 })
      if (user) chownSync(join(dir, name), user.uid, user.gid)
    }
    tls.push(
      '-c',
      'ssl=on',
      '-c',
      `ssl_key_file=${join(dir, 'server.key')}`,
      '-c',
      `ssl_cert_file=${join(dir, 'server.crt')}`,
    )
  }
  // A port picked free may be taken by the time the server binds it: try a few.
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const child = spawn(
      ...as(join(binDir, 'postgres'), [
        '-D',
        data,
        '-p',
        String(port),
        '-h',
        '127.0.0.1',
        '-k',
        dir,
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=200',
        ...tls,
      ]),
      { stdio: ['ignore', 'ignore', 'pipe'], cwd: dir },
    )
    let log = ''
    child.stderr!.on('data', (d: Buffer) => {
      log = (log + d.toString()).slice(-4000)
    })
    const exited = new Promise<void>((r) => child.once('exit', () => r()))
    const ready = () => {
      try {
        execFileSync(join(binDir, 'pg_isready'), ['-q', '-h', '127.0.0.1', '-p', String(port), '-U', 'berth'], {
          stdio: 'ignore',
        })
        return true
      } catch {
        return false
      }
    }
    for (let i = 0; i < 400 && child.exitCode === null && !ready(); i++) await new Promise((r) => setTimeout(r, 25))
    if (child.exitCode === null && ready()) {
      return {
        url: `postgres://berth@127.0.0.1:${port}/postgres`,
        socketDir: dir,
        port,
        binDir,
        async stop() {
          // SIGINT is the fast shutdown: running sessions are ended, nothing is written back.
          if (child.exitCode === null) child.kill('SIGINT')
          await exited
          rmSync(dir, { recursive: true, force: true })
        },
      }
    }
    if (child.exitCode === null) child.kill('SIGKILL')
    await exited
    if (attempt >= 3 || !/could not bind|in use/i.test(log)) {
      rmSync(dir, { recursive: true, force: true })
      throw new Error(`postgres did not start: ${log}`)
    }
  }
}
