/**
 * Property tests of the whole files path, on the local runtime (host processes, no engine):
 * a multipart upload of random files (sizes from empty to a few MiB, around the parser's
 * chunk and tar's 512-byte block boundaries; unicode, spaced, long and nested names) goes
 * through the multipart parser into the workspace, and the download's tar gives back the
 * same names and bytes. Invalid names are a 400 and leave the disk as it was.
 */
import { createHash } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { localRuntime } from '@berth/adapter-local'
import { readTar } from '@berth/testkit'
import { isApiError } from '@berth/contract'
import type { Logger } from '../src/ports/logger.js'
import type { TaskEngine } from '../src/tasks/engine.js'
import { WorkspaceFilesService } from '../src/workspaces/workspace-files.js'
import type { WorkspacesService } from '../src/workspaces/workspaces.js'
import { BLOCK_SIZES, bytesOf, invalidName, validName } from './upload-arbitraries.js'

const silent: Logger = { info() {}, warn() {}, error() {} }
let base: string
let files: WorkspaceFilesService
/** The container's `/workspace` on the host, and the directory around the container. */
let workspaceDir: string

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'berth-upload-prop-'))
  const rt = localRuntime({ baseDir: join(base, 'containers'), sandbox: 'none', logger: silent })
  const { id } = await rt.create({ image: 'none' })
  await rt.start(id)
  workspaceDir = join(base, 'containers', id, 'root', 'workspace')
  mkdirSync(workspaceDir, { recursive: true })
  // One workspace whose container is running: the service's only questions are these.
  const workspaces = {
    assert: async () => {},
    records: { get: async () => ({ id: 'ws_1', container_id: 'c_1', status: 'idle' }) },
  }
  const engine = { runtime: rt, pool: { list: () => [{ id: 'c_1', engine_id: id }] } }
  files = new WorkspaceFilesService({
    logger: silent,
    workspaces: workspaces as unknown as WorkspacesService,
    engine: engine as unknown as TaskEngine,
  })
})
afterAll(() => rmSync(base, { recursive: true, force: true }))

/** A multipart upload request whose body arrives in chunks of `chunk` bytes. */
async function uploadRequest(
  path: string,
  parts: { name: string; bytes: Uint8Array<ArrayBuffer> }[],
  chunk: number,
): Promise<Request> {
  const form = new FormData()
  form.append('path', path)
  for (const p of parts) form.append('files', new Blob([p.bytes]), p.name)
  const encoded = new Response(form)
  const body = new Uint8Array(await encoded.arrayBuffer())
  let at = 0
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= body.length) return controller.close()
      controller.enqueue(body.slice(at, at + chunk))
      at += chunk
    },
  })
  return new Request('http://berth.test/upload', {
    method: 'POST',
    headers: { 'content-type': encoded.headers.get('content-type')! },
    body: stream,
    duplex: 'half',
  } as RequestInit)
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex')

/** Every path under `dir`, relative to it, sorted; the staging directory itself aside (its contents count). */
function tree(dir: string): string[] {
  return (readdirSync(dir, { recursive: true }) as string[]).filter((p) => !/(^|\/)\.berth(\/uploads)?$/.test(p)).sort()
}

describe('upload → parser → workspace → tar', () => {
  let run = 0

  it('gives back the same names and bytes', async () => {
    const upload = fc.record({
      dirs: fc.array(validName, { minLength: 0, maxLength: 3 }),
      files: fc.uniqueArray(
        fc.record({
          name: validName,
          size: fc.oneof(
            { weight: 5, arbitrary: BLOCK_SIZES },
            { weight: 1, arbitrary: fc.integer({ min: 0, max: 3 * 1024 * 1024 }) },
          ),
          seed: fc.integer(),
        }),
        {
          minLength: 1,
          maxLength: 4,
          selector: (f) => f.name,
        },
      ),
      chunk: fc.oneof(fc.constantFrom(1, 511, 512, 513, 65_536), fc.integer({ min: 1, max: 200_000 })),
    })
    await fc.assert(
      fc.asyncProperty(upload, async ({ dirs, files: wanted, chunk }) => {
        // A fresh directory per run: no earlier run's files are in the way.
        const dir = [`run-${run++}`, ...dirs].join('/')
        const parts = wanted.map((f) => ({ name: f.name, bytes: bytesOf(f.size, f.seed) }))
        // Byte-at-a-time bodies of MiBs would only be slow: tiny chunks go with small bodies.
        const total = parts.reduce((n, p) => n + p.bytes.length, 0)
        const stored = await files.upload(
          'usr_1',
          'ws_1',
          await uploadRequest(`/workspace/${dir}/`, parts, total > 20_000 ? Math.max(chunk, 16_384) : chunk),
        )
        expect(stored.files.map((f) => [f.name, f.size])).toEqual(parts.map((p) => [p.name, p.bytes.length]))
        const tar = await readTar(await files.download('usr_1', 'ws_1', [`/workspace/${dir}`]))
        const back = new Map(tar.filter((e) => e.type === 'file').map((e) => [e.name, sha(e.content)]))
        expect(back).toEqual(new Map(parts.map((p) => [`${dir}/${p.name}`, sha(p.bytes)])))
      }),
      { numRuns: 50, seed: 24 },
    )
  }, 120_000)

  it('refuses invalid names with a 400 and writes nothing anywhere', async () => {
    const upload = fc.record({
      valid: fc.array(validName, { maxLength: 2 }),
      invalid: invalidName,
      size: BLOCK_SIZES,
    })
    const before = tree(base)
    await fc.assert(
      fc.asyncProperty(upload, async ({ valid, invalid, size }) => {
        const parts = [...new Set([...valid, invalid])].map((name, i) => ({ name, bytes: bytesOf(size, i) }))
        const err = await files.upload('usr_1', 'ws_1', await uploadRequest('/workspace/refused/', parts, 4096)).then(
          () => null,
          (e: unknown) => e,
        )
        expect(isApiError(err) && err.status).toBe(400)
        expect(tree(base)).toEqual(before)
      }),
      { numRuns: 50, seed: 24 },
    )
  }, 120_000)

  it("refuses writes into Berth's own .berth and into lost+found, and directories named with bidirectional characters", async () => {
    const before = tree(base)
    const attempts: [string, string, string][] = [
      ['/workspace/.berth/', 'events.jsonl', 'path'],
      ['/workspace/.berth/uploads/x', 'f.txt', 'path'],
      ['.berth', 'conversation', 'path'],
      ['/workspace/lost+found/', 'f.txt', 'path'],
      ['/workspace/', '.berth', 'files'],
      ['.', 'lost+found', 'files'],
      ['/workspace/dir\u202Etxt/', 'f.txt', 'path'],
      ['/workspace/a/\u2066b/', 'f.txt', 'path'],
    ]
    for (const [path, name, field] of attempts) {
      const err = await files
        .upload('usr_1', 'ws_1', await uploadRequest(path, [{ name, bytes: bytesOf(10, 1) }], 4096))
        .then(
          () => null,
          (e: unknown) => e,
        )
      expect(isApiError(err) && err.status, `${path} ${name}`).toBe(400)
      expect(isApiError(err) && JSON.stringify(err.details), `${path} ${name}`).toContain(`"path":"${field}"`)
      expect(tree(base)).toEqual(before)
    }
    // A .berth or lost+found below the top level is the caller's own.
    const ok = await files.upload(
      'usr_1',
      'ws_1',
      await uploadRequest('/workspace/nested/.berth/', [{ name: 'lost+found', bytes: bytesOf(3, 2) }], 4096),
    )
    expect(ok.files.map((f) => f.path)).toEqual(['/workspace/nested/.berth/lost+found'])
  })
})
