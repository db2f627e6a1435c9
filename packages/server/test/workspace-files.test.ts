/**
 * Workspace files over the real server on Podman: browse, upload (multipart) and download
 * (tar) against the workspace's real container, path traversal in every form, the upload
 * limit, ownership, and released workspaces (volume through a helper container, or gone).
 */
import { createHash, randomBytes } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import { collectExec } from '@berth/core'
import { readTar } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { failure } from './helpers.js'
import { onEngine, sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

// Raw requests on purpose: the exact multipart bodies, statuses and bytes are the point here.
/** An error answer. */
type ErrorBody = { code: string; error: string; details: { issues: { location: string; path: string }[] } }
/** A directory listing answer. */
type Listing = {
  path: string
  truncated: boolean
  entries: { name: string; type: string; size: number; mtime: string }[]
}
/** An upload answer. */
type Uploaded = { path: string; files: { name: string; path: string; size: number }[] }
const read = async <T>(res: Response | Promise<Response>): Promise<T> => (await (await res).json()) as T

let t: Awaited<ReturnType<typeof taskServer>>
/** A warm session workspace (its container stays for the whole suite). */
let wsId: string
/** The caller's id (workspaces are keyed by owner). */
let callerId: string

beforeAll(async () => {
  t = await taskServer('podman', { sessionIdleMs: 600_000 })
  const sub = await t.submit({
    mode: 'session',
    // Links the traversal tests need, made by the agent's own Bash tool (Claude Code's
    // permission check refuses `ln -s / ...` itself; busybox's applet is not on its list).
    prompt: `Make links. ${[
      'busybox ln -s / root-link',
      'ln -s /etc/passwd passwd-link',
      'mkdir -p inner/real up && echo in > inner/real/f.txt',
      'ln -s inner/real inner-link',
      'ln -s /etc/passwd up/victim',
    ]
      .map((command) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`)
      .join(' ')}`,
  })
  const task = await t.waitDone(sub.task_id)
  expect(task.status, JSON.stringify(task.error)).toBe('completed')
  wsId = task.workspace_id!
  const results = (await t.events(task.task_id)).filter((e) => e.type === 'tool_result')
  expect(results.map((e) => e.is_error)).toEqual([false, false, false, false, false])
  expect((await inContainer('readlink /workspace/root-link; readlink /workspace/up/victim')).stdout).toBe(
    '/\n/etc/passwd\n',
  )
  callerId = t.id
})
afterAll(async () => {
  await t.s.close()
  await sweep(t.runtime, t.pool)
})

/** The engine id of a running workspace's container. */
async function engineId(id = wsId): Promise<string> {
  const ws = await t.api.workspaces.get({ params: { id } })
  const c = t.s.berth.pool!.list().find((x) => x.id === ws.container_id)
  if (!c) throw new Error(`workspace ${id} has no container`)
  return c.engine_id
}

/** Run a command in the workspace's container. */
async function inContainer(cmd: string, id = wsId) {
  return collectExec(await t.runtime.exec(await engineId(id), { cmd: ['/bin/sh', '-c', cmd] }))
}

function upload(
  path: string | null,
  files: [string, Uint8Array | string][],
  opts: { id?: string; token?: string } = {},
) {
  const form = new FormData()
  if (path !== null) form.append('path', path)
  for (const [name, bytes] of files) form.append('files', new Blob([bytes as BlobPart]), name)
  return t.s.request(`/v1/workspaces/${opts.id ?? wsId}/files`, {
    method: 'POST',
    token: opts.token ?? t.token,
    body: form,
  })
}

const list = (path: string, id = wsId) =>
  t.s.request(`/v1/workspaces/${id}/files?path=${encodeURIComponent(path)}`, { token: t.token })
const download = (paths: string[], id = wsId) =>
  t.s.request(`/v1/workspaces/${id}/download?${paths.map((p) => `path=${encodeURIComponent(p)}`).join('&')}`, {
    token: t.token,
  })

async function expectPathRefused(res: Response, field = 'path') {
  const body = await read<ErrorBody>(res)
  expect(res.status, JSON.stringify(body)).toBe(400)
  expect(body.code).toBe('VALIDATION_FAILED')
  expect(body.details.issues.map((i) => i.path)).toContain(field)
  return body
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')

describe('upload, browse, download', () => {
  it('round-trips binary files byte for byte through nested paths', async () => {
    const big = randomBytes(1024 * 1024 + 12345)
    big.fill(0, 1000, 3000) // runs of NUL bytes
    const small = Uint8Array.from([0, 1, 2, 255, 0, 13, 10, 0])
    const res = await upload('nested/dir/deeper', [
      ['big.bin', big],
      ['small.bin', small],
      ['with space ü.txt', 'hello\n'],
    ])
    const body = await read<Uploaded>(res)
    expect(res.status, JSON.stringify(body)).toBe(201)
    expect(body).toEqual({
      path: '/workspace/nested/dir/deeper',
      files: [
        { name: 'big.bin', path: '/workspace/nested/dir/deeper/big.bin', size: big.length },
        { name: 'small.bin', path: '/workspace/nested/dir/deeper/small.bin', size: 8 },
        { name: 'with space ü.txt', path: '/workspace/nested/dir/deeper/with space ü.txt', size: 6 },
      ],
    })
    // Really in the container, with the same bytes.
    const sums = await inContainer('cd /workspace/nested/dir/deeper && sha256sum big.bin small.bin')
    expect(sums.stdout).toContain(sha(big))
    expect(sums.stdout).toContain(sha(small))

    const listing = await read<Listing>(list('/workspace/nested/dir/deeper'))
    expect(listing.path).toBe('/workspace/nested/dir/deeper')
    expect(listing.truncated).toBe(false)
    expect(listing.entries.map((e) => [e.name, e.type, e.size])).toEqual([
      ['big.bin', 'file', big.length],
      ['small.bin', 'file', 8],
      ['with space ü.txt', 'file', 6],
    ])
    expect(Date.parse(listing.entries[0]!.mtime)).toBeGreaterThan(Date.parse('2020-01-01'))

    const tar = await download(['nested/dir/deeper/big.bin', '/workspace/nested/dir'])
    expect(tar.status).toBe(200)
    expect(tar.headers.get('content-type')).toBe('application/x-tar')
    const entries = await readTar(new Uint8Array(await tar.arrayBuffer()))
    // The file first (the first path), then the directory with everything in it.
    expect(entries[0]!.name).toBe('nested/dir/deeper/big.bin')
    expect(entries.map((e) => e.name).sort()).toEqual([
      'nested/dir/',
      'nested/dir/deeper/',
      'nested/dir/deeper/big.bin',
      'nested/dir/deeper/big.bin',
      'nested/dir/deeper/small.bin',
      'nested/dir/deeper/with space ü.txt',
    ])
    const byName = new Map(entries.map((e) => [e.name, e]))
    expect(sha(byName.get('nested/dir/deeper/big.bin')!.content)).toBe(sha(big))
    expect(Buffer.compare(byName.get('nested/dir/deeper/small.bin')!.content, small)).toBe(0)
    expect(byName.get('nested/dir/deeper/with space ü.txt')!.content.toString()).toBe('hello\n')
  })

  it('browses the workspace itself, listing symlinks as links without following them', async () => {
    const listing = await read<Listing>(list(''))
    const byName = Object.fromEntries(listing.entries.map((e) => [e.name, e.type]))
    expect(byName).toMatchObject({
      'root-link': 'symlink',
      'passwd-link': 'symlink',
      inner: 'directory',
      'inner-link': 'symlink',
      nested: 'directory',
    })
    // A link that stays inside is followed for browsing.
    const inner = await read<Listing>(list('inner-link'))
    expect(inner.path).toBe('/workspace/inner-link')
    expect(inner.entries.map((e) => e.name)).toEqual(['f.txt'])
    // ... and downloads under the name asked for.
    const entries = await readTar(new Uint8Array(await (await download(['inner-link'])).arrayBuffer()))
    expect(entries.map((e) => e.name)).toEqual(['inner-link/', 'inner-link/f.txt'])
  })

  it('a second upload replaces a file; a file where a directory is, or a missing path field, is 400', async () => {
    expect((await upload('nested', [['again.txt', 'one']])).status).toBe(201)
    expect((await upload('nested', [['again.txt', 'two']])).status).toBe(201)
    expect((await inContainer('cat /workspace/nested/again.txt')).stdout).toBe('two')
    await expectPathRefused(await upload('nested', [['dir', 'x']]), 'files')
    await expectPathRefused(await upload(null, [['x.txt', 'x']]))
    const noFiles = await upload('nested', [])
    expect(noFiles.status).toBe(400)
    await expectPathRefused(await upload('nested', [['../up.txt', 'x']]), 'files')
    const notMultipart = await t.s.request(`/v1/workspaces/${wsId}/files`, {
      method: 'POST',
      token: t.token,
      json: { path: 'x' },
    })
    expect(notMultipart.status).toBe(415)
    expect(await read<{ code: string; details: unknown }>(notMultipart)).toMatchObject({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      details: { expected: 'multipart/form-data', received: 'application/json' },
    })
    // Nothing was staged and left behind.
    expect((await inContainer('ls -A /workspace/.berth/uploads 2>/dev/null | wc -l')).stdout.trim()).toBe('0')
  })
})

describe('upload path', () => {
  it('one file and a path naming a file: stored at /workspace/<path>; an existing directory or a trailing / takes the file name', async () => {
    const named = await upload('reports/q3/summary.md', [['local-name.md', '# Q3']])
    expect(named.status).toBe(201)
    expect(await named.json()).toEqual({
      path: '/workspace/reports/q3',
      files: [{ name: 'summary.md', path: '/workspace/reports/q3/summary.md', size: 4 }],
    })
    expect((await inContainer('cat /workspace/reports/q3/summary.md')).stdout).toBe('# Q3')
    expect((await inContainer('test -e /workspace/reports/q3/summary.md/local-name.md; echo $?')).stdout.trim()).toBe(
      '1',
    )
    // An existing directory: the directory form.
    const intoDir = await read<Uploaded>(upload('reports/q3', [['data.csv', 'a,b']]))
    expect(intoDir.files[0]!.path).toBe('/workspace/reports/q3/data.csv')
    // A trailing slash: a directory, created when missing.
    const slash = await read<Uploaded>(upload('fresh/dir/', [['one.txt', '1']]))
    expect(slash.files[0]!.path).toBe('/workspace/fresh/dir/one.txt')
    // Several files: always a directory.
    const many = await read<Uploaded>(
      upload('bundle', [
        ['a.txt', 'a'],
        ['b.txt', 'b'],
      ]),
    )
    expect(many.files.map((f) => f.path)).toEqual(['/workspace/bundle/a.txt', '/workspace/bundle/b.txt'])
    // Replacing a file by name works; a file where a directory is named by path is 400.
    expect((await upload('reports/q3/summary.md', [['x', '# Q3 v2']])).status).toBe(201)
    expect((await inContainer('cat /workspace/reports/q3/summary.md')).stdout).toBe('# Q3 v2')
  })
})

describe('paths that escape /workspace', () => {
  it('are refused with 400 naming path, and nothing outside is read or written', async () => {
    const passwd = (await inContainer('cat /etc/passwd')).stdout
    for (const path of [
      '../',
      '..',
      '/etc/passwd',
      '/etc',
      'a/../../x',
      'nested/../../etc',
      '/workspace/../etc',
      'root-link',
      'root-link/etc',
      'passwd-link',
      'bad\u0000name',
    ]) {
      const body = await expectPathRefused(await list(path))
      expect(JSON.stringify(body)).not.toContain('root:x:0:0')
      const tar = await download([path])
      const text = await tar.text()
      expect(tar.status, `${path}: ${text}`).toBe(400)
      expect(text).not.toContain('root:x:0:0')
      await expectPathRefused(await upload(path, [['evil.txt', 'pwned']]))
    }
    // One bad path among good ones refuses the whole download.
    expect((await download(['nested', 'root-link/etc/passwd'])).status).toBe(400)
    // Nothing was written outside: not through the links, not at the absolute paths.
    const found = await inContainer(
      'ls /evil.txt /etc/evil.txt /etc/passwd/evil.txt /x 2>/dev/null; find / -name evil.txt -not -path "/proc/*" 2>/dev/null',
    )
    expect(found.stdout).toBe('')
    expect((await inContainer('cat /etc/passwd')).stdout).toBe(passwd)
  })

  it('an upload onto a name that is a symlink to outside replaces the link, not its target', async () => {
    const passwd = (await inContainer('cat /etc/passwd')).stdout
    expect((await upload('up', [['victim', 'replaced']])).status).toBe(201)
    expect((await inContainer('cat /etc/passwd')).stdout).toBe(passwd)
    expect((await inContainer('test -L /workspace/up/victim || cat /workspace/up/victim')).stdout).toBe('replaced')
  })

  it("another caller's workspace is 404 for every file route", async () => {
    const other = await t.s.user('Mallory')
    for (const res of [
      await t.s.request(`/v1/workspaces/${wsId}/files?path=nested`, { token: other.token }),
      await t.s.request(`/v1/workspaces/${wsId}/download?path=nested`, { token: other.token }),
      await upload('nested', [['mallory.txt', 'x']], { token: other.token }),
    ]) {
      expect(res.status).toBe(404)
      expect((await read<ErrorBody>(res)).code).toBe('NOT_FOUND')
    }
    expect((await inContainer('test -e /workspace/nested/mallory.txt; echo $?')).stdout.trim()).toBe('1')
  })
})

describe('the upload limit', () => {
  /** A raw upload: `declared` as content-length (or chunked), `size` bytes of file data. */
  function rawUpload(size: number, declared?: number): Promise<{ status: number; body: ErrorBody }> {
    const boundary = 'berthtestboundary'
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\nlimit/\r\n--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="over.bin"\r\n\r\n`,
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${t.s.url}/v1/workspaces/${wsId}/files`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${t.token}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          ...(declared !== undefined && { 'content-length': String(declared) }),
        },
      })
      let answered = false
      req.on('response', (res) => {
        let text = ''
        res.on('data', (c) => (text += c))
        res.on('end', () => {
          answered = true
          try {
            resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as ErrorBody })
          } catch (err) {
            reject(err)
          }
        })
        // The server closes the connection on a 413 while this side may still be sending.
        res.on('error', (err) => (answered ? undefined : reject(err)))
      })
      // A write may fail once the server answered and closed; the answer still comes.
      req.on('error', (err) => setTimeout(() => (answered ? undefined : reject(err)), 2000))
      const chunk = Buffer.alloc(1024 * 1024, 7)
      void (async () => {
        req.write(head)
        for (let sent = 0; sent < size && !req.destroyed; sent += chunk.length) {
          if (!req.write(chunk.subarray(0, Math.min(chunk.length, size - sent))))
            await new Promise((r) => req.once('drain', r))
        }
        req.end(tail)
      })().catch(() => {})
    })
  }

  it('over the default 100 MiB is 413, declared or streamed, and nothing is written', async () => {
    const declared = await rawUpload(1024, 100 * 1024 * 1024 + 1)
    expect(declared).toMatchObject({ status: 413, body: { code: 'PAYLOAD_TOO_LARGE' } })
    const streamed = await rawUpload(100 * 1024 * 1024 + 1)
    expect(streamed).toMatchObject({
      status: 413,
      body: { code: 'PAYLOAD_TOO_LARGE', details: { limit: 100 * 1024 * 1024 } },
    })
    expect((await inContainer('test -e /workspace/limit; echo $?')).stdout.trim()).toBe('1')
    expect((await inContainer('ls -A /workspace/.berth/uploads | wc -l')).stdout.trim()).toBe('0')
    // Just under the limit goes through.
    const fits = await rawUpload(10 * 1024 * 1024)
    expect(fits.status).toBe(201)
    expect((await inContainer('stat -c %s /workspace/limit/over.bin')).stdout.trim()).toBe(String(10 * 1024 * 1024))
  }, 120_000)
})

describe('a broken upload', () => {
  it('a connection cut mid-file leaves nothing staged and is no server error', async () => {
    const boundary = 'berthcut'
    const req = httpRequest(`${t.s.url}/v1/workspaces/${wsId}/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    })
    req.on('error', () => {})
    req.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="path"\r\n\r\ncut\r\n--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="cut.bin"\r\n\r\n`,
    )
    req.write(Buffer.alloc(2 * 1024 * 1024, 1))
    // The file is being staged in the container by now.
    await vi.waitFor(
      async () => expect((await inContainer('ls -A /workspace/.berth/uploads | wc -l')).stdout.trim()).toBe('1'),
      15_000,
    )
    req.destroy()
    await vi.waitFor(
      async () => expect((await inContainer('ls -A /workspace/.berth/uploads | wc -l')).stdout.trim()).toBe('0'),
      20_000,
    )
    expect((await inContainer('test -e /workspace/cut; echo $?')).stdout.trim()).toBe('1')
    expect(t.s.logs.filter((l) => l.includes('"level":"error"'))).toEqual([])
  })
})

describe('released workspaces', () => {
  it('without a volume (a batch task): the files outlive the container until the retention expires', async () => {
    const done = await t.run({
      prompt: 'A batch task. [[berth:tool Bash {"command":"mkdir -p out && echo batch-result > out/report.txt"}]]',
    })
    expect(done.status).toBe('completed')
    const id = done.workspace_id!
    expect(await t.api.workspaces.get({ params: { id } })).toMatchObject({ status: 'idle', container_id: null })
    const listing = await list('out', id)
    expect(listing.status).toBe(200)
    expect((await read<Listing>(listing)).entries.map((e) => [e.name, e.size])).toEqual([['report.txt', 13]])
    expect(
      (await readTar(new Uint8Array(await (await download(['out/report.txt'], id)).arrayBuffer()))).map((e) => [
        e.name,
        e.content.toString(),
      ]),
    ).toEqual([['out/report.txt', 'batch-result\n']])
    // An upload is kept too.
    expect((await upload('out/added.txt', [['ignored.txt', 'added later']], { id })).status).toBe(201)
    const again = (await readTar(new Uint8Array(await (await download(['out'], id)).arrayBuffer()))).filter(
      (e) => e.type === 'file',
    )
    expect(again.map((e) => [e.name, e.content.toString()]).sort()).toEqual([
      ['out/added.txt', 'added later'],
      ['out/report.txt', 'batch-result\n'],
    ])
    await vi.waitFor(
      async () => expect((await onEngine(t.runtime, t.pool)).filter((c) => c.labels['berth.files'])).toEqual([]),
      15_000,
    )
    // After the retention (7 days by default) the copy is gone: a clear 400.
    t.s.clock.advance(8 * 24 * 3600_000)
    const expired = await list('', id)
    const body = await read<ErrorBody>(expired)
    expect(expired.status).toBe(400)
    expect(body.details.issues[0]).toMatchObject({ location: 'params', path: 'id' })
  }, 120_000)

  it('with persistent sessions: served from the volume through a short-lived helper container', async () => {
    const profile = await t.api.profiles.create({
      body: { name: 'Keeper', slug: 'keeper', api_key_id: t.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const sub = await t.submit({
      mode: 'session',
      profile_id: profile.id,
      prompt: 'Write a note. [[berth:tool Bash {"command":"echo kept > note.txt"}]]',
    })
    const task = await t.waitDone(sub.task_id)
    expect(task.status).toBe('completed')
    const id = task.workspace_id!
    // What the idle timer does after `sessionIdleMs`.
    await t.s.berth.services.tasks.containers.release(callerId, id)
    const ws = await t.api.workspaces.get({ params: { id } })
    expect(ws).toMatchObject({ status: 'idle', container_id: null })

    const listing = await read<Listing>(list('', id))
    expect(listing.entries.map((e) => e.name)).toContain('note.txt')
    expect((await upload('docs/', [['added.txt', 'added while idle']], { id })).status).toBe(201)
    const entries = await readTar(
      new Uint8Array(await (await download(['note.txt', 'docs/added.txt'], id)).arrayBuffer()),
    )
    expect(entries.map((e) => [e.name, e.content.toString()])).toEqual([
      ['note.txt', 'kept\n'],
      ['docs/added.txt', 'added while idle'],
    ])
    // Every helper is gone once its request is done.
    await vi.waitFor(
      async () => expect((await onEngine(t.runtime, t.pool)).filter((c) => c.labels['berth.files'])).toEqual([]),
      15_000,
    )
    // The next prompt in the session sees the uploaded file.
    const next = await t.submit({
      mode: 'session',
      profile_id: profile.id,
      session_id: task.session_id!,
      prompt: 'Read it. [[berth:tool Bash {"command":"cat docs/added.txt"}]]',
    })
    const two = await t.waitDone(next.task_id)
    const events = await t.events(two.task_id)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('added while idle'),
    })
    await t.api.workspaces.delete({ params: { id } })
    expect((await failure(t.api.workspaces.get({ params: { id } }))).status).toBe(404)
  }, 120_000)
})
