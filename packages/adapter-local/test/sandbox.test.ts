import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { collectExec, silentLogger, type ContainerRuntime } from '@berth/core'
import { localRuntime } from '../src/index.js'
import { hostPath, readMeta, rootDir } from '../src/paths.js'
import { processTree } from '../src/processes.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-sandbox-'))
const hostDir = mkdtempSync(join(tmpdir(), 'berth-local-host-'))
afterAll(() => {
  rmSync(baseDir, { recursive: true, force: true })
  rmSync(hostDir, { recursive: true, force: true })
})

// A server secret in the server's own environment must never reach a container.
const SECRET = `server-secret-${process.pid}`
beforeAll(() => {
  process.env.BERTH_TEST_SERVER_SECRET = SECRET
})
afterAll(() => {
  delete process.env.BERTH_TEST_SERVER_SECRET
})

const created: [ContainerRuntime, string][] = []
afterEach(async () => {
  await Promise.all(created.splice(0).map(([rt, id]) => rt.remove(id)))
})

async function started(rt: ContainerRuntime, spec: Parameters<ContainerRuntime['create']>[0]): Promise<string> {
  const { id } = await rt.create(spec)
  created.push([rt, id])
  await rt.start(id)
  return id
}

/** Processes whose command line holds `marker`, from /proc. */
function withCmdline(marker: string): string[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(marker)
      } catch {
        return false
      }
    })
}

const sh = async (rt: ContainerRuntime, id: string, script: string) =>
  collectExec(await rt.exec(id, { cmd: ['sh', '-c', script] }))

describe('local runtime in a bubblewrap sandbox', () => {
  const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })

  it('shows the container at container paths: /workspace, HOME /root and /tmp are its own directories', async () => {
    const id = await started(rt, { image: 'x', workingDir: '/workspace' })
    const r = await sh(
      rt,
      id,
      'pwd; echo "$HOME"; echo w > /workspace/w.txt; echo h > ~/h.txt; echo t > /tmp/t.txt; ls /workspace',
    )
    expect(r.exitCode).toBe(0)
    expect(r.stdout.split('\n').slice(0, 2)).toEqual(['/workspace', '/root'])
    expect(readFileSync(hostPath(baseDir, id, '/workspace/w.txt'), 'utf8')).toBe('w\n')
    expect(readFileSync(hostPath(baseDir, id, '/root/h.txt'), 'utf8')).toBe('h\n')
    expect(readFileSync(hostPath(baseDir, id, '/tmp/t.txt'), 'utf8')).toBe('t\n')
  })

  it('mounts a volume at /workspace, with a working directory inside it, and keeps its files for the next container', async () => {
    const volume = `vol-${process.pid}-${Date.now()}`
    const spec = {
      image: 'x',
      workingDir: '/workspace/sub',
      mounts: [{ type: 'volume' as const, source: volume, target: '/workspace' }],
    }
    const first = await started(rt, spec)
    const r = await sh(rt, first, 'pwd; echo kept > note.txt')
    expect(r.stdout).toBe('/workspace/sub\n')
    await rt.remove(first)
    const second = await started(rt, spec)
    expect((await sh(rt, second, 'cat note.txt')).stdout).toBe('kept\n')
    await rt.removeVolume(volume)
  })

  it('keeps the host out: its files are not there, system directories are read-only, no shadow file', async () => {
    writeFileSync(join(hostDir, 'host-only.txt'), 'host\n')
    const id = await started(rt, { image: 'x', workingDir: '/workspace' })
    const r = await sh(
      rt,
      id,
      `cat ${join(hostDir, 'host-only.txt')} 2>/dev/null && echo host-visible; ` +
        'touch /usr/berth-probe 2>/dev/null && echo usr-writable; ' +
        'test -e /etc/shadow && echo shadow-visible; ' +
        'test -e /etc/passwd && echo passwd-ok; node -e "console.log(\'node-ok\')"',
    )
    expect(r.stdout).not.toContain('host-visible')
    expect(r.stdout).not.toContain('usr-writable')
    expect(r.stdout).not.toContain('shadow-visible')
    expect(r.stdout).toContain('passwd-ok')
    expect(r.stdout).toContain('node-ok')
  })

  it('gives commands only a minimal environment plus the container and exec env', async () => {
    const id = await started(rt, { image: 'x', workingDir: '/workspace', env: { FROM_SPEC: 'a' } })
    const r = collectExec(await rt.exec(id, { cmd: ['env'], env: { FROM_EXEC: 'b' } }))
    const names = (await r).stdout
      .trim()
      .split('\n')
      .map((l) => l.slice(0, l.indexOf('=')))
      .sort()
    expect((await r).stdout).not.toContain(SECRET)
    expect(names).toEqual(['BERTH_EXEC_ID', 'FROM_EXEC', 'FROM_SPEC', 'HOME', 'LANG', 'PATH', 'PWD']) // PWD: bwrap's --chdir
  })

  it('runs its own process tree: the host PID 1 and host processes are not visible', async () => {
    const id = await started(rt, { image: 'x', workingDir: '/workspace' })
    const r = await sh(rt, id, `ls /proc | grep -c '^[0-9]'; test -e /proc/${process.pid} && echo server-visible`)
    expect(r.stdout).not.toContain('server-visible')
    expect(Number(r.stdout.split('\n')[0])).toBeLessThan(10)
  })

  it('has a network namespace of its own, loopback only, whatever the spec asks', async () => {
    const bridge = await started(rt, { image: 'x', workingDir: '/workspace', network: 'bridge' })
    const none = await started(rt, { image: 'x', workingDir: '/workspace', network: 'none' })
    const names = async (id: string) =>
      (await sh(rt, id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")).stdout.trim().split('\n')
    expect(await names(bridge)).toEqual(['lo'])
    expect(await names(none)).toEqual(['lo'])
  })
})

describe('local runtime limits (bwrap, cgroups)', () => {
  const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })

  it('enforces the pids limit on everything in the container, execs included', async () => {
    // 40 background sleepers, counted with a builtin; the shell stops at the first failed fork.
    const script = 'i=0; while [ $i -lt 40 ]; do sleep 5 & echo started; i=$((i+1)); done'
    const sleepers = async (limits?: { pids: number }) => {
      const id = await started(rt, { image: 'x', workingDir: '/workspace', ...(limits && { limits }) })
      const r = await sh(rt, id, script)
      return {
        count: r.stdout.split('\n').filter((l) => l === 'started').length,
        stderr: r.stderr,
        info: await rt.inspect(id),
      }
    }
    const limited = await sleepers({ pids: 16 })
    expect(limited.info.limits).toEqual({ pids: 16 })
    expect(limited.stderr).toMatch(/fork/i)
    expect(limited.count).toBeGreaterThan(0)
    expect(limited.count).toBeLessThan(16)
    const free = await sleepers()
    expect(free.info.limits).toEqual({})
    expect(free.count).toBe(40)
  })

  it('kills what outgrows the memory limit, and reports the OOM kill', async () => {
    const id = await started(rt, { image: 'x', workingDir: '/workspace', limits: { memoryBytes: 64 * 1024 * 1024 } })
    const r = collectExec(
      await rt.exec(id, { cmd: ['node', '-e', 'const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1))'] }),
    )
    expect((await r).exitCode).toBe(137)
    expect((await rt.stats(id)).memoryLimitBytes).toBe(64 * 1024 * 1024)
    expect((await rt.inspect(id)).oomKilled).toBe(true)
  })
})

describe('local runtime: a sandbox goes with its process', () => {
  const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
  const alive = (pid: number) => {
    try {
      return !/^\S+ \([^)]*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
    } catch {
      return false
    }
  }
  const gone = async (pids: number[]) => {
    await vi.waitFor(() => expect(pids.filter(alive)).toEqual([]), 10_000).catch(() => {})
    return pids.filter(alive)
  }

  it.each(['killed from outside', 'stopped'] as const)(
    'no process of the container is left once its main process is %s',
    async (how) => {
      const id = await started(rt, { image: 'x', workingDir: '/workspace' })
      const { pid } = await readMeta(baseDir, id)
      // Keeper, bwrap, the sandbox's init and its idle process, once they are all up.
      const comm = (p: number) => readFileSync(`/proc/${p}/comm`, 'utf8').trim()
      await vi
        .waitFor(() => expect(processTree(pid!).map(comm)).toContain('sleep'), { timeout: 10_000, interval: 20 })
        .catch(() => {})
      const tree = processTree(pid!)
      expect(tree.map(comm).sort()).toEqual(['bwrap', 'bwrap', 'sh', 'sleep'])
      if (how === 'stopped') await rt.stop(id, { timeoutSeconds: 5 })
      else process.kill(pid!, 'SIGKILL')
      const left = await gone(tree)
      expect(left.map((p) => `${p}: ${readFileSync(`/proc/${p}/stat`, 'utf8').slice(0, 60)}`)).toEqual([])
    },
  )
})

describe('local runtime: remove leaves nothing running', () => {
  const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })

  it('even when the main process was killed while its sandbox was still being set up', async () => {
    const leftovers: string[] = []
    for (let i = 0; i < 6; i++) {
      const { id } = await rt.create({ image: 'x', workingDir: '/workspace' })
      await rt.start(id)
      // Killed as soon as bwrap runs: it may have forked its sandbox before tying it to its own life.
      const { pid } = await readMeta(baseDir, id)
      while (processTree(pid!).length < 2) await new Promise((r) => setImmediate(r))
      process.kill(pid!, 'SIGKILL')
      await rt.remove(id)
      const marker = `${rootDir(baseDir, id)}/`
      await vi.waitFor(() => expect(withCmdline(marker)).toEqual([]), 5_000).catch(() => {})
      leftovers.push(...withCmdline(marker))
    }
    expect(leftovers).toEqual([])
  })
})

describe('local runtime without a sandbox', () => {
  const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'none' })

  it('scrubs the environment too, and tells the runner where the container root is', async () => {
    const id = await started(rt, { image: 'x', workingDir: '/workspace' })
    const r = await sh(rt, id, 'env')
    expect(r.stdout).not.toContain(SECRET)
    expect(r.stdout).toContain(`BERTH_CONTAINER_ROOT=${rootDir(baseDir, id)}\n`)
    expect(r.stdout).toContain(`HOME=${hostPath(baseDir, id, '/root')}`)
  })

  it('maps absolute arguments that name container paths (and mounts) to their host paths', async () => {
    writeFileSync(join(hostDir, 'mounted.txt'), 'from the mount\n')
    const id = await started(rt, {
      image: 'x',
      workingDir: '/workspace',
      mounts: [{ type: 'bind', source: hostDir, target: '/opt/tool', readOnly: true }],
    })
    await sh(rt, id, 'echo inside > in.txt')
    const r = collectExec(await rt.exec(id, { cmd: ['cat', '/workspace/in.txt', '/opt/tool/mounted.txt'] }))
    expect((await r).stdout).toBe('inside\nfrom the mount\n')
  })
})

describe('local runtime across server restarts (bwrap)', () => {
  it("a container's main process outlives the process that started it; its execs do not", async () => {
    const marker = `exec-survived-${process.pid}-${Date.now()}`
    // Another Node process plays the server: it starts a container and a long exec, then exits.
    const script = `
      import { localRuntime } from ${JSON.stringify(new URL('../src/index.ts', import.meta.url).pathname)}
      const rt = localRuntime({ baseDir: ${JSON.stringify(baseDir)}, logger: { info() {}, warn() {}, error() {} }, sandbox: 'bwrap' })
      const { id } = await rt.create({ image: 'x', workingDir: '/workspace' })
      await rt.start(id)
      // Exit once the command runs (its sandbox set up), as a crashing server would.
      let running
      const started = new Promise((r) => (running = r))
      await rt.exec(id, { cmd: ['sh', '-c', 'echo started; sleep 60; touch ${marker}'], onStdout: () => running() })
      await started
      console.log(id)
      process.exit(0)
    `
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
    })
    const id = out.trim().split('\n').at(-1)!
    const rt = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    created.push([rt, id])
    // The container is still running and usable from a new runtime (a restarted server adopts it)...
    expect((await rt.inspect(id)).state).toBe('running')
    expect((await sh(rt, id, 'echo alive')).stdout).toBe('alive\n')
    // ...while the exec's sandbox went with the process that started it.
    await vi.waitFor(() => expect(withCmdline(marker)).toEqual([]), 10_000)
  })
})
