/** Conformance: limits, isolation, a non-root user and egress policies, each as the runtime declares them. */
import { release } from 'node:os'
import { expect, it } from 'vitest'
import { expectContainerFailure, MiB, type Suite } from './suite.js'
import { packTar } from '../tar.js'

/** Registers the cases of this concern in the current `describe` block. */
export function isolationCases(s: Suite): void {
  const { make, sh, opts } = s
  it('applies resource limits where the runtime enforces them, and says so', async () => {
    const limits = { memoryBytes: 256 * MiB, pids: 64, cpus: 0.5 }
    const id = await make({ limits })
    const info = await s.rt.inspect(id)
    if (!opts.capabilities.limits) {
      // An honest runtime without enforcement reports none rather than pretending.
      expect(info.limits).toEqual({})
      return
    }
    expect(info.limits).toEqual(limits)
    if (opts.isolation === 'gvisor') {
      // gVisor's kernel shows no cgroup files inside; the engine holds the sandbox to the
      // limit from outside, as its stats (read from the host's cgroup) show.
      expect((await s.rt.stats(id)).memoryLimitBytes).toBe(256 * MiB)
      expect((await sh(id, 'echo alive')).stdout).toBe('alive\n')
      return
    }
    const mem = await sh(
      id,
      'cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
    )
    expect(Number(mem.stdout.trim())).toBe(256 * MiB)
    const pids = await sh(id, 'cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max')
    expect(Number(pids.stdout.trim())).toBe(64)
  })

  it('isolates where it says it does: no new privileges, capabilities bounded, an init as PID 1', async () => {
    const r = await sh(s.shared, 'grep -E "^(CapBnd|NoNewPrivs)" /proc/self/status; cat /proc/1/comm')
    if (!opts.capabilities.isolation) {
      // The host's own PID 1 is not ours: nothing here is isolated, and the runtime says so.
      expect(s.rt.capabilities.limits).toBe(false)
      return
    }
    const field = (k: string) => new RegExp(`${k}:\\s+(\\S+)`).exec(r.stdout)?.[1]
    // gVisor's /proc has no NoNewPrivs line (the engine hands runsc the flag in the OCI spec).
    expect(field('NoNewPrivs')).toBe(opts.isolation === 'gvisor' ? undefined : '1')
    const bounding = BigInt(`0x${field('CapBnd')}`)
    for (const [cap, bit] of Object.entries({
      SYS_ADMIN: 21,
      NET_ADMIN: 12,
      NET_RAW: 13,
      MKNOD: 27,
      SYS_PTRACE: 19,
      SYS_MODULE: 16,
    })) {
      expect({ cap, kept: (bounding >> BigInt(bit)) & 1n }).toEqual({ cap, kept: 0n })
    }
    expect(r.stdout.trim().split('\n').at(-1)).not.toBe('sleep')
  })

  it('gives the isolation level it is run at, and refuses one it lacks', async () => {
    const levels = s.rt.isolations ? await s.rt.isolations() : ['container']
    expect(levels).toContain('container')
    // Where the commands' system calls go: gVisor's kernel says so in its boot log and
    // reports its own release, never the host's.
    const r = await sh(s.shared, 'uname -r; dmesg 2>/dev/null | head -n 3')
    if (opts.isolation === 'gvisor') {
      expect(levels).toContain('gvisor')
      expect(r.stdout.split('\n')[0]).not.toBe(release())
      expect(r.stdout).toMatch(/gVisor/i)
    } else {
      expect(r.stdout).not.toMatch(/gVisor/i)
    }
    if (!levels.includes('gvisor')) await expectContainerFailure(make({ isolation: 'gvisor' }), 'unsupported')
  })

  it('runs commands as a non-root user where it says it can: no capabilities, its working directory and put files its own', async () => {
    if (!s.rt.capabilities.unprivilegedUser) return
    const id = await make({ user: '1000:1000' })
    const r = await sh(id, 'id -u; grep CapEff /proc/self/status; touch /workspace/mine && echo writable')
    expect(r.stdout).toMatch(/^1000\n/)
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/)
    expect(r.stdout).toContain('writable')
    await s.rt.putArchive(id, '/workspace', await packTar([{ name: 'put.txt', content: 'x\n' }]))
    expect(
      (await sh(id, 'stat -c %u /workspace/put.txt && echo more >> /workspace/put.txt && echo appended')).stdout,
    ).toMatch(/^1000\nappended/)
  })

  it('kill() of a root command ends what it started as the non-root user too', async () => {
    if (!s.rt.capabilities.unprivilegedUser) return
    // As Berth's runner starts its agent: root, and a child of the container's user.
    const id = await make({ user: '1000:1000' })
    // The child appends to a workspace file while it lives: another exec sees the file grow,
    // then stop (each exec may have PID and network namespaces of its own, as bubblewrap gives).
    const file = `/workspace/alive-${Math.random().toString(36).slice(2)}`
    const beat = `setInterval(()=>require('fs').appendFileSync('${file}','x'),50)`
    const spawnChild = `require('child_process').spawn(process.execPath,['-e',${JSON.stringify(beat)}],{uid:1000,gid:1000,stdio:'ignore'})`
    const proc = await s.rt.exec(id, {
      user: '0',
      cmd: ['node', '-e', `${spawnChild};console.log('ready');setInterval(()=>{},1000)`],
    })
    for await (const c of proc.stdout) if (Buffer.from(c).toString().includes('ready')) break
    const probe = async () =>
      (
        await sh(
          id,
          `node -e "const fs=require('fs');const n=()=>{try{return fs.statSync('${file}').size}catch{return 0}};const a=n();setTimeout(()=>console.log(n()>a?'up':'gone'),400)"`,
        )
      ).stdout.trim()
    await expect.poll(probe, { timeout: 10_000 }).toBe('up')
    await proc.kill()
    expect((await proc.exit).killed).toBe(true)
    await expect.poll(probe, { timeout: 10_000 }).toBe('gone')
  })

  it('enforces the egress policies it names, and refuses the others', async () => {
    const enforced = s.rt.capabilities.egress ?? []
    for (const policy of ['none', 'public', 'allowlist'] as const) {
      if (enforced.includes(policy)) continue
      await expectContainerFailure(make({ egress: { policy } }), 'engine_error')
    }
    if (!enforced.includes('none')) return
    const id = await make({ egress: { policy: 'none' } })
    // Interfaces of the command's network namespace, loopback excepted.
    const r = await sh(id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | grep -v '^lo$' | wc -l")
    expect(r.stdout.trim()).toBe('0')
    // Loopback is up: the runner's forwarder and the agent's own servers listen on 127.0.0.1.
    const lo = await sh(
      id,
      `node -e "const n=require('net');const s=n.createServer(c=>c.end('up')).listen(0,'127.0.0.1',()=>n.connect(s.address().port,'127.0.0.1').on('data',d=>{console.log(String(d));process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(1)}))"`,
    )
    expect(lo.stdout.trim()).toBe('up')
  })
}
