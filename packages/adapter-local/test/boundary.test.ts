/**
 * The bubblewrap sandbox as a tenant boundary (issue 29): a download resolves every path
 * inside the sandbox, so a symlink the agent swaps in mid-download never yields a host file;
 * the sandbox has no network but its own loopback; the agent's commands run as an
 * unprivileged host uid.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { collectExec, silentLogger, type ContainerSpec } from '@berth/core'
import { readTar } from '@berth/testkit'
import { localRuntime } from '../src/index.js'
import { hostPath } from '../src/paths.js'

// The data dir as the server lays it out: containers below it, its 0600 key beside them.
const dataDir = mkdtempSync(join(tmpdir(), 'berth-local-boundary-'))
const baseDir = join(dataDir, 'containers')
const KEY = `host-secret-${randomBytes(12).toString('hex')}`
writeFileSync(join(dataDir, 'encryption.key'), KEY, { mode: 0o600 })
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
const created: string[] = []
afterEach(async () => {
  await Promise.all(created.splice(0).map((id) => rt.remove(id)))
})

async function started(spec: Partial<ContainerSpec> = {}): Promise<string> {
  const { id } = await rt.create({ image: 'x', workingDir: '/workspace', ...spec })
  created.push(id)
  await rt.start(id)
  return id
}

const sh = async (id: string, script: string, user?: string) =>
  collectExec(await rt.exec(id, { cmd: ['sh', '-c', script], ...(user && { user }) }))

/** What a download of `path` gave: the files' contents, or `failed` (missing, or changed mid-read). */
async function download(id: string, path: string): Promise<string[] | 'failed'> {
  try {
    const entries = await readTar(await rt.getArchive(id, path))
    return entries.filter((e) => e.type === 'file').map((e) => e.content.toString())
  } catch {
    return 'failed'
  }
}

describe('the local sandbox as a tenant boundary', () => {
  it('1,000 downloads during a directory/symlink swap race never return a host file', async () => {
    const volume = `boundary-${process.pid}-${Date.now()}`
    const id = await started({ user: '1000:1000', mounts: [{ type: 'volume', source: volume, target: '/workspace' }] })
    // Decoys at the paths the downloads name, so one that resolves through the real directory has an answer.
    const decoy = `real${dataDir}`
    expect(
      (await sh(id, `mkdir -p ${decoy} && echo decoy > ${decoy}/encryption.key && cp ${decoy}/* real/`)).exitCode,
    ).toBe(0)
    // Without a race, a symlink to the host's data dir or to `/` leads nowhere the host keeps.
    expect((await sh(id, `ln -s ${dataDir} to-data && ln -s / to-root`)).exitCode).toBe(0)
    expect(await download(id, '/workspace/to-data/encryption.key')).toBe('failed')
    expect(await download(id, `/workspace/to-root${dataDir}/encryption.key`)).toBe('failed')

    // The agent's side: `d` flips between a real directory and symlinks to `/` and to the data dir.
    const racer = await rt.exec(id, {
      cmd: [
        'sh',
        '-c',
        // Each state holds a moment, so downloads meet every one of them.
        `while :; do for to in / ${dataDir}; do rm -rf d; cp -a real d; sleep 0.002; rm -rf d; ln -s $to d; sleep 0.002; done; done`,
      ],
      user: '1000:1000',
    })
    const outcomes: (string[] | 'failed')[] = []
    const paths = ['/workspace/d/encryption.key', `/workspace/d${dataDir}/encryption.key`]
    let next = 0
    const worker = async () => {
      while (next < 1000) {
        const i = next++
        outcomes.push(await download(id, paths[i % 2]!))
      }
    }
    await Promise.all([worker(), worker(), worker(), worker()])
    await racer.kill()
    await racer.exit.catch(() => {})

    expect(outcomes).toHaveLength(1000)
    const files = outcomes.flatMap((o) => (o === 'failed' ? [] : o))
    expect(files.filter((f) => f.includes(KEY))).toEqual([])
    // Only the decoy, whole or caught while `cp` was writing it.
    expect(new Set(files.filter((f) => !'decoy\n'.startsWith(f)))).toEqual(new Set())
    // The race was run: some downloads went through the real directory.
    expect(files.length).toBeGreaterThan(0)
  }, 300_000)

  it('a symlink left in a reused workspace does not make the next working directory on the host', async () => {
    const volume = `reused-${process.pid}-${Date.now()}`
    const mounts = [{ type: 'volume' as const, source: volume, target: '/workspace' }]
    const first = await started({ user: '1000:1000', mounts })
    expect((await sh(first, `ln -s ${dataDir} sub`)).exitCode).toBe(0)
    // The next container of the workspace works in /workspace/sub/made: the path resolves in
    // its own view (where the link leads nowhere, so the create may fail), never on the host.
    await rt.create({ image: 'x', workingDir: '/workspace/sub/made', user: '1000:1000', mounts }).then(
      ({ id }) => created.push(id),
      () => {},
    )
    expect(existsSync(join(dataDir, 'made'))).toBe(false)
  })

  it('cannot connect to a loopback listener on the host, nor to another sandbox’s', async () => {
    const host: Server = createServer((s) => s.end('host\n'))
    await new Promise<void>((r) => host.listen(0, '127.0.0.1', () => r()))
    const port = (host.address() as { port: number }).port
    try {
      const [a, b] = [await started(), await started()]
      // B listens on the very port the host listens on (possible only in a namespace of its
      // own) and checks, from inside, that it answers: the probe below works where it may.
      const listening = await rt.exec(b, {
        cmd: [
          'node',
          '-e',
          `const net = require('net')
           net.createServer((s) => s.end('sandbox-b\\n')).listen(${port}, '127.0.0.1', () =>
             net.connect(${port}, '127.0.0.1').on('data', (d) => console.log('self:' + d.toString().trim())))
           setInterval(() => {}, 1000)`,
        ],
      })
      const seen: string[] = []
      for await (const chunk of listening.stdout) {
        seen.push(Buffer.from(chunk).toString())
        if (seen.join('').includes('self:sandbox-b')) break
      }
      expect(seen.join('')).toContain('self:sandbox-b')

      const probe = `const s = require('net').connect(${port}, '127.0.0.1')
        s.on('data', (d) => { console.log('reached:' + d.toString().trim()); process.exit(0) })
        s.on('error', (e) => { console.log('refused:' + e.code); process.exit(0) })
        setTimeout(() => { console.log('timeout'); process.exit(0) }, 3000)`
      const r = await collectExec(await rt.exec(a, { cmd: ['node', '-e', probe] }))
      expect(r.stdout.trim()).toBe('refused:ECONNREFUSED')
      await listening.kill()
      await listening.exit.catch(() => {})
    } finally {
      await new Promise((r) => host.close(r))
    }
  }, 60_000)

  it("runs the container's user as an unprivileged host uid: workspace its own, host-root files out of reach", async () => {
    const id = await started({ user: '1000:1000' })
    const r = await sh(
      id,
      'id -u; grep CapEff /proc/self/status; echo mine > /workspace/f && echo wrote; node -e "console.log(\'node runs\')"',
    )
    expect(r.stdout).toMatch(/^1000\n/)
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/)
    expect(r.stdout).toContain('wrote')
    // The system view is every uid's to read (Node reads /etc/ssl/openssl.cnf at start).
    expect(r.stdout).toContain('node runs')
    // Host uid 1000, not root mapped into a user namespace: the host sees the file as 1000's.
    expect(statSync(hostPath(baseDir, id, '/workspace/f')).uid).toBe(1000)
    // A root-only file in its own view (say, one the runner keeps) is not the agent's to read.
    expect((await sh(id, 'echo s > /tmp/runner-only && chmod 600 /tmp/runner-only', '0')).exitCode).toBe(0)
    expect((await sh(id, 'cat /tmp/runner-only || echo refused')).stdout).toContain('refused')
    // Nor can it read it through a download: downloads run as the container's user too.
    expect(await download(id, '/tmp/runner-only')).toBe('failed')
  }, 60_000)
})
