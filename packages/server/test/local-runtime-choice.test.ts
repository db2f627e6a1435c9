/**
 * Choosing the local runtime (issue 29): in a bubblewrap sandbox where bwrap works; without
 * it, only when the operator said `BERTH_RUNTIME=local` and `BERTH_LOCAL_UNSANDBOXED=true`.
 * `auto` falling back to an unsandboxed local runtime refuses to start, naming the ways out.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { localRuntime } from '@berth/adapter-local'
import { configFromEnv, localFor, NO_ISOLATION_WARNING } from '@berth/server'
import { afterAll, describe, expect, it } from 'vitest'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-local-choice-'))
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

/** A local runtime as it is on a machine without bubblewrap. */
const withoutBwrap = (() => ({
  sandbox: 'none',
  description: 'NO ISOLATION (bwrap is not installed (Debian: apt-get install bubblewrap)): plain host processes',
})) as unknown as typeof localRuntime

describe('choosing the local runtime', () => {
  it('auto without an engine and without bubblewrap refuses, naming both ways out', () => {
    const warnings: string[] = []
    const config = { dataDir, localUnsandboxed: true } // even with the opt-out: auto never runs unsandboxed
    expect(() => localFor(config, (w) => warnings.push(w), { explicit: false, make: withoutBwrap })).toThrow(
      /Start Docker or Podman or install bubblewrap.*set BERTH_RUNTIME=local and BERTH_LOCAL_UNSANDBOXED=true/,
    )
    expect(warnings).toEqual([])
  })

  it('BERTH_RUNTIME=local without bubblewrap needs BERTH_LOCAL_UNSANDBOXED=true, then warns loudly', () => {
    const warnings: string[] = []
    const warn = (w: string) => warnings.push(w)
    expect(() => localFor({ dataDir, localUnsandboxed: false }, warn, { explicit: true, make: withoutBwrap })).toThrow(
      /BERTH_RUNTIME=local, but the local runtime cannot sandbox.*BERTH_LOCAL_UNSANDBOXED=true/,
    )
    const chosen = localFor({ dataDir, localUnsandboxed: true }, warn, { explicit: true, make: withoutBwrap })
    expect(chosen.description).toMatch(/NO ISOLATION/)
    expect(warnings).toEqual([NO_ISOLATION_WARNING])
  })

  it('uses bubblewrap where it works, explicit or not', () => {
    const warnings: string[] = []
    const chosen = localFor({ dataDir, localUnsandboxed: false }, (w) => warnings.push(w), { explicit: false })
    expect(chosen.description).toMatch(/bubblewrap sandbox/)
    expect(warnings.join('\n')).not.toContain('NO CONTAINER ISOLATION')
  })

  it('reads BERTH_LOCAL_UNSANDBOXED as true or false only', () => {
    expect(configFromEnv({}).localUnsandboxed).toBe(false)
    expect(configFromEnv({ BERTH_LOCAL_UNSANDBOXED: 'true' }).localUnsandboxed).toBe(true)
    expect(() => configFromEnv({ BERTH_LOCAL_UNSANDBOXED: 'yes' })).toThrow(/BERTH_LOCAL_UNSANDBOXED/)
  })
})
