/** Conformance: exec (streamed output, exit codes, callbacks, stdin, env and cwd, abort and kill). */
import { collectExec } from '@berth/core'
import { expect, it } from 'vitest'
import { readTar } from '../tar.js'
import { text, type Suite } from './suite.js'

/** Registers the cases of this concern in the current `describe` block. */
export function execCases(s: Suite): void {
  const { make, sh } = s
  it('exec streams stdout and stderr separately, as they are written, with exit code 0', async () => {
    const proc = await s.rt.exec(s.shared, {
      cmd: ['sh', '-c', 'echo first; echo oops >&2; sleep 1; echo second'],
    })
    const started = Date.now()
    let firstAt = 0
    const out: Uint8Array[] = []
    const err: Uint8Array[] = []
    await Promise.all([
      (async () => {
        for await (const c of proc.stdout) {
          if (!firstAt) firstAt = Date.now()
          out.push(c)
        }
      })(),
      (async () => {
        for await (const c of proc.stderr) err.push(c)
      })(),
    ])
    const result = await proc.exit
    const ended = Date.now()
    expect(result).toEqual({ exitCode: 0, killed: false })
    expect(text(out)).toBe('first\nsecond\n')
    expect(text(err)).toBe('oops\n')
    // The first line arrived while the command was still sleeping: streamed, not buffered.
    expect(ended - firstAt).toBeGreaterThan(600)
    expect(firstAt - started).toBeLessThan(900)
  })

  it('exec reports a non-zero exit code and its output', async () => {
    const r = await sh(s.shared, 'echo partial; echo bad >&2; exit 7')
    expect(r.exitCode).toBe(7)
    expect(r.killed).toBe(false)
    expect(r.stdout).toBe('partial\n')
    expect(r.stderr).toBe('bad\n')
  })

  it('exec delivers output to callbacks when given', async () => {
    const out: Uint8Array[] = []
    const err: Uint8Array[] = []
    const proc = await s.rt.exec(s.shared, {
      cmd: ['sh', '-c', 'printf abc; printf xyz >&2'],
      onStdout: (c) => out.push(c),
      onStderr: (c) => err.push(c),
    })
    const r = await collectExec(proc)
    expect(r.exitCode).toBe(0)
    expect(text(out)).toBe('abc')
    expect(text(err)).toBe('xyz')
    expect(r.stdout).toBe('') // went to the callback instead
  })

  it('exec pipes stdin from a string, a web stream and an async iterable, binary-safe', async () => {
    const fromString = await sh(s.shared, 'cat', { stdin: 'hello\nworld\n' })
    expect(fromString.stdout).toBe('hello\nworld\n')

    const enc = new TextEncoder()
    const web = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode('one '))
        c.enqueue(enc.encode('two'))
        c.close()
      },
    })
    expect((await sh(s.shared, 'cat', { stdin: web })).stdout).toBe('one two')

    const bytes = new Uint8Array(256 * 64)
    for (let i = 0; i < bytes.length; i++) bytes[i] = i % 256
    async function* gen() {
      for (let i = 0; i < bytes.length; i += 1000) yield bytes.subarray(i, i + 1000)
    }
    const proc = await s.rt.exec(s.shared, { cmd: ['cat'], stdin: gen() })
    const chunks: Uint8Array[] = []
    for await (const c of proc.stdout) chunks.push(c)
    expect((await proc.exit).exitCode).toBe(0)
    expect(Buffer.concat(chunks).equals(Buffer.from(bytes))).toBe(true)

    // Without stdin the command sees end-of-input at once instead of waiting.
    const none = await sh(s.shared, 'wc -c')
    expect(none.stdout.trim()).toBe('0')
  })

  it('applies the container env and working directory, and per-exec env and cwd', async () => {
    const id = await make({ env: { FROM_SPEC: 'spec-value' }, workingDir: '/workspace/sub' })
    const r = await sh(id, 'echo "$FROM_SPEC|$FROM_EXEC"; pwd; echo marker > here.txt', {
      env: { FROM_EXEC: 'exec-value' },
    })
    expect(r.exitCode).toBe(0)
    const [vars, cwd] = r.stdout.split('\n')
    expect(vars).toBe('spec-value|exec-value')
    expect(cwd?.endsWith('/workspace/sub')).toBe(true)
    // The relative write landed in the working directory, seen through the archive API.
    const [entry] = await readTar(await s.rt.getArchive(id, '/workspace/sub/here.txt'))
    expect(entry?.content.toString()).toBe('marker\n')
    // cwd overrides the working directory for one exec.
    const other = await sh(id, 'pwd', { cwd: '/workspace' })
    expect(other.stdout.trim().endsWith('/workspace')).toBe(true)
    expect(other.stdout.trim().endsWith('/sub')).toBe(false)
  })

  it('kills a command and its children through an AbortSignal', async () => {
    const ac = new AbortController()
    const proc = await s.rt.exec(s.shared, {
      cmd: ['sh', '-c', 'echo go; (sleep 2; touch too-late-child) & sleep 2; touch too-late'],
      signal: ac.signal,
    })
    for await (const c of proc.stdout) {
      if (text([c]).includes('go')) break
    }
    const t0 = Date.now()
    ac.abort()
    const result = await proc.exit
    expect(result.killed).toBe(true)
    expect(Date.now() - t0).toBeLessThan(3000)
    await new Promise((r) => setTimeout(r, 2500))
    const ls = await sh(s.shared, 'ls')
    expect(ls.stdout).not.toContain('too-late')
  })

  it('an abort that lands while the command is starting kills it: exit says killed, the command never finishes', async () => {
    // The abort lands after exec() was called and before it resolved, at several points of
    // the start (an engine adapter makes round trips there; a local one starts at once).
    const aborts: ((abort: () => void) => void)[] = [
      (abort) => setImmediate(abort),
      (abort) => setTimeout(abort, 0),
      (abort) => setTimeout(abort, 5),
      (abort) => setTimeout(abort, 20),
    ]
    for (const [i, schedule] of aborts.entries()) {
      const ac = new AbortController()
      const starting = s.rt.exec(s.shared, {
        cmd: ['sh', '-c', `echo started; sleep 2; touch aborted-at-start-${i}`],
        signal: ac.signal,
      })
      schedule(() => ac.abort())
      const r = await collectExec(await starting)
      expect(r.killed, `abort ${i}`).toBe(true)
    }
    await new Promise((r) => setTimeout(r, 2500))
    expect((await sh(s.shared, 'ls')).stdout).not.toContain('aborted-at-start')
  })

  it('kill() ends a command that ignores SIGTERM', async () => {
    const proc = await s.rt.exec(s.shared, { cmd: ['sh', '-c', "trap '' TERM; echo ready; sleep 30"] })
    for await (const c of proc.stdout) if (text([c]).includes('ready')) break
    const t0 = Date.now()
    await proc.kill()
    expect((await proc.exit).killed).toBe(true)
    expect(Date.now() - t0).toBeLessThan(6000)
  })
}
