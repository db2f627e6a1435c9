import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

/** Options of {@link startFakeGitServer}. */
export interface FakeGitServerOptions {
  /** TLS key and certificate (see `selfSignedCert`). */
  tls: { key: string; cert: string }
  /**
   * Decide whether HTTP Basic credentials may read: e.g. the password must be an access
   * token the fake provider issued and still honours. Requests without credentials get a
   * 401 with `WWW-Authenticate`, as real hosts answer, so git asks its credential helper.
   */
  authorize(username: string, password: string): boolean | Promise<boolean>
  /** Listen address (default `127.0.0.1`; a container reaching the host needs e.g. `0.0.0.0`). */
  host?: string
  port?: number
}

/** One request the fake Git host received. */
export interface FakeGitRequest {
  method: string
  path: string
  status: number
  /** The Basic username, when credentials came. */
  username?: string
}

/** A running fake Git host. */
export interface FakeGitServer {
  /** The port it listens on (build clone URLs with the address the client reaches it by). */
  port: number
  /** Where the bare repositories live (`<name>.git`). */
  root: string
  requests: FakeGitRequest[]
  /** Create a bare repository `<name>.git` with one commit of `files` on `main`. */
  createRepo(name: string, files: Record<string, string>): void
  close(): Promise<void>
}

function git(args: string[], cwd: string): void {
  const run = spawnSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: cwd },
  })
  if (run.status !== 0) throw new Error(`git ${args.join(' ')} failed: ${run.error?.message ?? run.stderr}`)
}

/**
 * A local Git host over HTTPS: git's smart HTTP protocol served by the host's
 * `git http-backend` (CGI) behind a Node HTTPS server that requires HTTP Basic credentials,
 * the way GitHub, GitLab and Bitbucket take an OAuth token as the password. Needs `git` on
 * the host.
 *
 * @example
 * ```ts
 * const gitHost = await startFakeGitServer({ tls: selfSignedCert({ ips: ['127.0.0.1'] }), authorize: (_u, p) => provider.tokenOwner(p) !== null })
 * gitHost.createRepo('demo', { 'README.md': '# Demo\n' })
 * // git clone https://127.0.0.1:<port>/demo.git
 * ```
 */
export async function startFakeGitServer(opts: FakeGitServerOptions): Promise<FakeGitServer> {
  const root = mkdtempSync(join(tmpdir(), 'berth-fake-git-'))
  const requests: FakeGitRequest[] = []

  async function handle(req: IncomingMessage, res: ServerResponse, rec: FakeGitRequest): Promise<number> {
    const url = new URL(req.url ?? '/', 'https://fake')
    const m = /^Basic\s+(\S+)$/i.exec(req.headers.authorization ?? '')
    const [user, ...rest] = m ? Buffer.from(m[1]!, 'base64').toString('utf8').split(':') : []
    if (user !== undefined) rec.username = user
    if (user === undefined || !(await opts.authorize(user, rest.join(':')))) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="fake git host"', 'content-type': 'text/plain' })
      res.end('Authentication required\n')
      return 401
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: root,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      HOME: root,
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      REMOTE_USER: user,
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(req.headers['content-length'] && { CONTENT_LENGTH: req.headers['content-length'] }),
      ...(req.headers['content-encoding'] && { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }),
      ...(req.headers['git-protocol'] && { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
    }
    const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] })
    req.pipe(cgi.stdin)
    let head = Buffer.alloc(0)
    let started = false
    let status = 200
    return new Promise<number>((resolve, reject) => {
      cgi.on('error', reject)
      cgi.stdout.on('data', (chunk: Buffer) => {
        if (started) {
          res.write(chunk)
          return
        }
        head = Buffer.concat([head, chunk])
        const text = head.toString('latin1')
        const end = text.search(/\r?\n\r?\n/)
        if (end < 0) return
        const sep = /\r?\n\r?\n/.exec(text.slice(end))![0].length
        const headers: Record<string, string> = {}
        for (const line of text.slice(0, end).split(/\r?\n/)) {
          const i = line.indexOf(':')
          if (i < 0) continue
          const k = line.slice(0, i).trim().toLowerCase()
          const v = line.slice(i + 1).trim()
          if (k === 'status') status = Number.parseInt(v, 10) || 200
          else headers[k] = v
        }
        res.writeHead(status, headers)
        started = true
        res.write(head.subarray(end + sep))
      })
      cgi.on('close', (code) => {
        if (!started) {
          status = 500
          res.writeHead(500, { 'content-type': 'text/plain' })
          res.end(`git http-backend exited ${code}\n`)
        } else res.end()
        resolve(status)
      })
    })
  }

  const server = createServer({ key: opts.tls.key, cert: opts.tls.cert }, (req, res) => {
    const rec: FakeGitRequest = { method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0]!, status: 0 }
    requests.push(rec)
    handle(req, res, rec).then(
      (s) => (rec.status = s),
      (err: unknown) => {
        rec.status = 500
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' })
        res.end(String(err))
      },
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve())
  })
  return {
    port: (server.address() as AddressInfo).port,
    root,
    requests,
    createRepo(name, files) {
      const bare = join(root, `${name}.git`)
      const work = mkdtempSync(join(tmpdir(), 'berth-fake-git-work-'))
      try {
        git(['init', '-q', '--bare', '-b', 'main', bare], root)
        git(['init', '-q', '-b', 'main', '.'], work)
        for (const [path, content] of Object.entries(files)) {
          mkdirSync(dirname(join(work, path)), { recursive: true })
          writeFileSync(join(work, path), content)
        }
        git(['add', '-A'], work)
        git(
          ['-c', 'user.name=Fake Git', '-c', 'user.email=fake@git.invalid', 'commit', '-q', '-m', 'Initial commit'],
          work,
        )
        git(['push', '-q', bare, 'HEAD:refs/heads/main'], work)
      } finally {
        rmSync(work, { recursive: true, force: true })
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => {
          rmSync(root, { recursive: true, force: true })
          resolve()
        })
      }),
  }
}
