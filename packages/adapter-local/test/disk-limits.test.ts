import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { afterAll } from 'vitest'
import { silentLogger } from '@berth/core'
import { diskLimitSuite } from '@berth/testkit'
import { localRuntime } from '../src/index.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-disks-'))
const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))
// After the suite's own afterAll (its containers and volumes, and so their disks, are gone by then).
afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
  rmSync(baseDir, { recursive: true, force: true })
})

// bwrap binds each disk at the working directory; `sandbox: 'bwrap'` throws where it cannot work (never skips).
diskLimitSuite(
  'local (bwrap)',
  () => localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap', disks: { dir } }),
  {
    image: 'ignored-by-local',
    diskDir: dir,
    // The sandbox's `/` is the host's system directories read-only, bubblewrap's in-memory
    // root and the container's own directories: the workspace, `/tmp` and `/root` are sized.
    readOnlyRoot: false,
  },
)
