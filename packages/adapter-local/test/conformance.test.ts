import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll } from 'vitest'
import { silentLogger } from '@berth/core'
import { runtimeConformanceSuite } from '@berth/testkit'
import { localRuntime } from '../src/index.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-conformance-'))
afterAll(() => rmSync(baseDir, { recursive: true, force: true }))

const killMain = async (id: string) => {
  const { pid } = JSON.parse(readFileSync(join(baseDir, id, 'meta.json'), 'utf8')) as { pid: number }
  process.kill(pid, 'SIGKILL')
}

// `sandbox: 'bwrap'` throws when bubblewrap cannot work here: the suite fails, never skips
// (scripts/engines/ensure.sh installs it).
runtimeConformanceSuite('local (bwrap)', () => localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' }), {
  image: 'ignored-by-local',
  // bubblewrap isolates (namespaces, no capabilities, no new privileges); the limits come
  // from a cgroup per container, which root on the project's machines can write.
  capabilities: {
    isolation: true,
    limits: true,
    unprivilegedUser: true,
    egress: ['none', 'public', 'allowlist'],
    outlivesServer: false,
  },
  // A base directory that cannot be created (its parent is a file) is the local "engine down".
  makeUnreachable: () => localRuntime({ baseDir: '/dev/null/berth-local', logger: silentLogger, sandbox: 'bwrap' }),
  killFromOutside: killMain,
})

runtimeConformanceSuite('local (no sandbox)', () => localRuntime({ baseDir, logger: silentLogger, sandbox: 'none' }), {
  image: 'ignored-by-local',
  // Plain host processes: nothing isolated, nothing limited, and the runtime must say so.
  capabilities: { isolation: false, limits: false, egress: [], outlivesServer: false },
  makeUnreachable: () => localRuntime({ baseDir: '/dev/null/berth-local', logger: silentLogger, sandbox: 'none' }),
  killFromOutside: killMain,
})
