import { mkdtempSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { afterAll } from 'vitest'
import { diskLimitSuite, readEngine } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
const dir = mkdtempSync(join(tmpdir(), 'berth-disks-'))
// After the suite's own afterAll (its containers, and so their disks, are gone by then).
afterAll(() => rmSync(dir, { recursive: true, force: true }))

diskLimitSuite('docker', () => dockerRuntime({ socketPath: engine.socketPath, disks: { dir } }), {
  image: engine.image,
  diskDir: dir,
})
